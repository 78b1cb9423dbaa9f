// Command twinctl is the twinlog admin CLI; see package
// cmd/twinctl/internal/cli for the commands and their exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/twinlog/twinlog/cmd/twinctl/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:], cli.Options{
		Codec: storageCodec,
		// dump-log reads segment files read-only (dumplog.go), never
		// through storage.Open, which may recover and truncate.
		DumpLog: segmentDumper{},
	})
	stop()
	os.Exit(code)
}
