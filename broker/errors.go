package broker

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/codec"
	"github.com/twinlog/twinlog/internal/rpcopt"
	"github.com/twinlog/twinlog/storage"
)

// Sentinel errors. Callers use errors.Is.
var (
	// ErrInvalidRequest: a request field is malformed (gRPC InvalidArgument).
	ErrInvalidRequest = errors.New("broker: invalid request")
	// ErrNotRunning: the broker is starting or shutting down (Unavailable).
	ErrNotRunning = errors.New("broker: not running")
	// ErrPartitionClosed: the partition left this broker while a request
	// was using it.
	ErrPartitionClosed = errors.New("broker: partition closed")
)

// statusRules are the broker's own errors' gRPC codes (rpcopt.ToStatus).
var statusRules = []rpcopt.StatusRule{
	{Err: ErrInvalidRequest, Code: codes.InvalidArgument},
	{Err: ErrNotRunning, Code: codes.Unavailable},
}

// toStatus maps an error to a gRPC status. Protocol outcomes travel as
// ErrorCode inside responses and never come here.
func toStatus(err error) error { return rpcopt.ToStatus(err, statusRules...) }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
}

// storageCode maps a storage error met while serving a partition to the
// per-partition error code.
func storageCode(err error) pb.ErrorCode {
	switch {
	case err == nil:
		return pb.ErrorCode_ERROR_CODE_NONE
	case errors.Is(err, storage.ErrCorrupt):
		return pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE
	case errors.Is(err, storage.ErrBatchTooLarge):
		return pb.ErrorCode_ERROR_CODE_MESSAGE_TOO_LARGE
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE
	case errors.Is(err, storage.ErrClosed), errors.Is(err, ErrPartitionClosed):
		return pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER
	}
	return pb.ErrorCode_ERROR_CODE_KAFKA_STORAGE_ERROR
}

// releaseProduce returns a produce request's receive buffer (its records
// alias it, see codec.Server) once the handler is done with it. It comes
// first in the chain so the buffer goes back whatever the inner
// interceptors and the handler do.
func releaseProduce(c *codec.Server) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if r, ok := req.(*pb.ProduceRequest); ok {
			defer c.Release(r)
		}
		return handler(ctx, req)
	}
}
