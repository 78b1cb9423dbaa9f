package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// The SCRAM credential APIs (DescribeUserScramCredentials,
// AlterUserScramCredentials, KIP-554) translate to the AdminService's,
// which the broker forwards to the controller. The mechanism codes are
// Kafka's on both sides (1 SCRAM-SHA-256, 2 SCRAM-SHA-512), so they
// convert by number; the controller validates them (INVALID_REQUEST for
// any other code) and the credentials (UNACCEPTABLE_CREDENTIAL). The
// salted passwords pass through; nothing here logs them.
//
// As Kafka does, the APIs are served whether or not the listener has
// SASL: credentials live in the cluster's metadata either way.

// duplicateResource is Kafka's DUPLICATE_RESOURCE, for a user described
// twice in one request.
const duplicateResource int16 = 92

// describeUserSCRAMCredentials answers DescribeUserScramCredentials (key
// 50): Describe on the cluster, else CLUSTER_AUTHORIZATION_FAILED. No user
// (null or empty) describes every user with a credential. A user listed
// more than once is DUPLICATE_RESOURCE and not asked of the controller, as
// Kafka answers it; the others are described.
func (s *Server) describeUserSCRAMCredentials(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	if code := s.access(ctx).describeSCRAMCredentials(); code != 0 {
		return failDescribeUserSCRAMCredentials(req, code), nil
	}
	listed := map[string]int{}
	for _, u := range req.Users {
		listed[u.Name]++
	}
	preq := &pb.DescribeUserScramCredentialsRequest{}
	var dups []string
	for _, u := range req.Users {
		switch n := listed[u.Name]; {
		case n == 1:
			preq.Users = append(preq.Users, u.Name)
		case n > 1:
			dups = append(dups, u.Name)
			listed[u.Name] = 0 // once
		}
	}
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	resp.SetVersion(req.GetVersion())
	// Only duplicates listed: asking for none would describe everyone.
	if len(req.Users) == 0 || len(preq.Users) > 0 {
		presp, err := s.admin.DescribeUserScramCredentials(ctx, preq)
		if err != nil {
			resp := failDescribeUserSCRAMCredentials(req, s.errorCode(err)).(*kmsg.DescribeUserSCRAMCredentialsResponse)
			resp.ErrorMessage = kmsg.StringPtr(err.Error())
			return resp, nil
		}
		resp.ErrorCode, resp.ErrorMessage = kafkaCode(presp.GetError()), optional(presp.GetErrorMessage())
		for _, pr := range presp.GetResults() {
			r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode, r.ErrorMessage = pr.GetUser(), kafkaCode(pr.GetError()), optional(pr.GetErrorMessage())
			for _, c := range pr.GetCredentials() {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = int8(c.GetMechanism()), c.GetIterations()
				r.CredentialInfos = append(r.CredentialInfos, ci)
			}
			resp.Results = append(resp.Results, r)
		}
	}
	for _, u := range dups {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = u, duplicateResource
		r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + u)
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// failDescribeUserSCRAMCredentials fails the request with code, and each
// listed user with it, as Kafka does.
func failDescribeUserSCRAMCredentials(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode = code
	seen := map[string]bool{}
	for _, u := range req.Users {
		if seen[u.Name] {
			continue
		}
		seen[u.Name] = true
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = u.Name, code
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// alterUserSCRAMCredentials answers AlterUserScramCredentials (key 51):
// Alter on the cluster, else every user's result is
// CLUSTER_AUTHORIZATION_FAILED and nothing is altered. Results are per
// user, in the order the request first names them (deletions, then
// upsertions); the controller alters a user all or nothing.
func (s *Server) alterUserSCRAMCredentials(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	if code := s.access(ctx).alterSCRAMCredentials(); code != 0 {
		return failAlterUserSCRAMCredentials(req, code), nil
	}
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	resp.SetVersion(req.GetVersion())
	users := alteredUsers(req)
	if len(users) == 0 {
		return resp, nil
	}
	preq := &pb.AlterUserScramCredentialsRequest{}
	for _, d := range req.Deletions {
		preq.Deletions = append(preq.Deletions, &pb.ScramCredentialDeletion{Name: d.Name, Mechanism: pb.ScramMechanism(d.Mechanism)})
	}
	for _, u := range req.Upsertions {
		preq.Upsertions = append(preq.Upsertions, &pb.ScramCredentialUpsertion{
			Name: u.Name, Mechanism: pb.ScramMechanism(u.Mechanism), Iterations: u.Iterations,
			Salt: u.Salt, SaltedPassword: u.SaltedPassword,
		})
	}
	presp, err := s.admin.AlterUserScramCredentials(ctx, preq)
	if err != nil {
		resp := failAlterUserSCRAMCredentials(req, s.errorCode(err)).(*kmsg.AlterUserSCRAMCredentialsResponse)
		for i := range resp.Results {
			resp.Results[i].ErrorMessage = kmsg.StringPtr(err.Error())
		}
		return resp, nil
	}
	byUser := map[string]*pb.AlterUserScramCredentialsResult{}
	for _, r := range presp.GetResults() {
		if _, ok := byUser[r.GetUser()]; !ok {
			byUser[r.GetUser()] = r
		}
	}
	for _, u := range users {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = u
		if pr := byUser[u]; pr != nil {
			r.ErrorCode, r.ErrorMessage = kafkaCode(pr.GetError()), optional(pr.GetErrorMessage())
		} else {
			r.ErrorCode, r.ErrorMessage = unknownServerError, kmsg.StringPtr("the controller did not answer for the user")
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// alteredUsers are the users an AlterUserScramCredentials names, each
// once, in the order first named (deletions, then upsertions).
func alteredUsers(req *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	var users []string
	seen := map[string]bool{}
	add := func(u string) {
		if !seen[u] {
			seen[u] = true
			users = append(users, u)
		}
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return users
}

func failAlterUserSCRAMCredentials(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	resp.SetVersion(req.GetVersion())
	for _, u := range alteredUsers(req) {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = u, code
		resp.Results = append(resp.Results, r)
	}
	return resp
}
