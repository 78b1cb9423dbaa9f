package metastate

import (
	"errors"
	"fmt"
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/scram"
)

// SCRAM credential bounds.
const (
	// MaxScramCredentials is the most credentials a cluster holds.
	MaxScramCredentials = 100_000
	// MaxUserName is the longest user name, in bytes.
	MaxUserName = 1024
)

var (
	ecUnacceptableCredential = twinlogv1.ErrorCode_ERROR_CODE_UNACCEPTABLE_CREDENTIAL
	ecResourceNotFound       = twinlogv1.ErrorCode_ERROR_CODE_RESOURCE_NOT_FOUND
)

// AlterUserScramCredentials sets and deletes users' SCRAM credentials
// (Kafka's AlterUserScramCredentials). Results are per user: a user with
// any refused alteration (see AlterUserScramCredentialsResult) keeps all
// its credentials as they were; the other users' alterations are made.
// The stored record is derived from the salted password
// (scram.FromSaltedPassword): the password never reaches the controller.
func (s *State) AlterUserScramCredentials(req *twinlogv1.AlterUserScramCredentialsRequest) (*twinlogv1.MetadataDelta, *twinlogv1.AlterUserScramCredentialsResponse) {
	type change struct {
		set *twinlogv1.UserScramCredentialRecord // nil: delete
		m   twinlogv1.ScramMechanism
	}
	var order []string
	changes := map[string][]change{}
	failed := map[string]error{}
	codes := map[string]twinlogv1.ErrorCode{}
	fail := func(user string, ec twinlogv1.ErrorCode, err error) {
		if failed[user] == nil {
			failed[user], codes[user] = err, ec
		}
	}
	note := func(user string) {
		if _, ok := changes[user]; !ok {
			if _, bad := failed[user]; !bad {
				order = append(order, user)
			}
			changes[user] = nil
		}
	}
	check := func(user string, m twinlogv1.ScramMechanism) bool {
		note(user)
		switch {
		case user == "" || len(user) > MaxUserName:
			fail(user, ecInvalid, fmt.Errorf("user name must be 1 to %d bytes", MaxUserName))
		case m != twinlogv1.ScramMechanism_SCRAM_MECHANISM_SCRAM_SHA_256 && m != twinlogv1.ScramMechanism_SCRAM_MECHANISM_SCRAM_SHA_512:
			fail(user, ecInvalid, fmt.Errorf("unknown SCRAM mechanism %d", m))
		case slices.ContainsFunc(changes[user], func(c change) bool { return c.m == m }):
			fail(user, ecInvalid, fmt.Errorf("user %q and mechanism %v altered twice in one request", user, m))
		default:
			return true
		}
		return false
	}
	for _, del := range req.GetDeletions() {
		if !check(del.GetName(), del.GetMechanism()) {
			continue
		}
		if s.ScramCredential(del.GetName(), del.GetMechanism()) == nil {
			fail(del.GetName(), ecResourceNotFound, fmt.Errorf("user %q has no %v credential", del.GetName(), del.GetMechanism()))
			continue
		}
		changes[del.GetName()] = append(changes[del.GetName()], change{m: del.GetMechanism()})
	}
	for _, up := range req.GetUpsertions() {
		if !check(up.GetName(), up.GetMechanism()) {
			continue
		}
		m, _ := scram.MechanismFromKafka(int8(up.GetMechanism()))
		c, err := scram.FromSaltedPassword(m, up.GetSaltedPassword(), up.GetSalt(), int(up.GetIterations()))
		if err != nil {
			fail(up.GetName(), ecUnacceptableCredential, err)
			continue
		}
		changes[up.GetName()] = append(changes[up.GetName()], change{m: up.GetMechanism(), set: &twinlogv1.UserScramCredentialRecord{
			Name: up.GetName(), Mechanism: up.GetMechanism(), Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}})
	}
	resp := &twinlogv1.AlterUserScramCredentialsResponse{}
	d := &twinlogv1.MetadataDelta{Offset: s.Offset() + 1}
	count := s.ScramCount()
	for _, user := range order {
		res := &twinlogv1.AlterUserScramCredentialsResult{User: user}
		resp.Results = append(resp.Results, res)
		if err := failed[user]; err != nil {
			res.Error, res.ErrorMessage = codes[user], err.Error()
			continue
		}
		grow := 0
		for _, c := range changes[user] {
			switch {
			case c.set == nil:
				grow--
			case s.ScramCredential(user, c.m) == nil:
				grow++
			}
		}
		if count+grow > MaxScramCredentials {
			res.Error = twinlogv1.ErrorCode_ERROR_CODE_REQUEST_LIMIT_REACHED
			res.ErrorMessage = fmt.Sprintf("the cluster holds %d SCRAM credentials, the most it keeps", MaxScramCredentials)
			continue
		}
		count += grow
		for _, c := range changes[user] {
			if c.set == nil {
				d.RemovedScramCredentials = append(d.RemovedScramCredentials, &twinlogv1.UserScramCredentialRecord{Name: user, Mechanism: c.m})
			} else {
				d.ScramCredentials = append(d.ScramCredentials, c.set)
			}
		}
	}
	if len(d.ScramCredentials) == 0 && len(d.RemovedScramCredentials) == 0 {
		return nil, resp
	}
	return d, resp
}

// DescribeUserScramCredentials lists users' mechanisms and iterations, never
// their salts or keys (Kafka's DescribeUserScramCredentials). Listed users
// without credentials are RESOURCE_NOT_FOUND; a user listed twice is
// INVALID_REQUEST (Kafka's DUPLICATE_RESOURCE) for the whole request.
func (s *State) DescribeUserScramCredentials(req *twinlogv1.DescribeUserScramCredentialsRequest) *twinlogv1.DescribeUserScramCredentialsResponse {
	resp := &twinlogv1.DescribeUserScramCredentialsResponse{}
	byUser := map[string][]*twinlogv1.ScramCredentialInfo{}
	var users []string
	for _, r := range s.ScramCredentials() {
		if _, ok := byUser[r.GetName()]; !ok {
			users = append(users, r.GetName())
		}
		byUser[r.GetName()] = append(byUser[r.GetName()], &twinlogv1.ScramCredentialInfo{Mechanism: r.GetMechanism(), Iterations: r.GetIterations()})
	}
	if want := req.GetUsers(); len(want) > 0 {
		sorted := slices.Sorted(slices.Values(want))
		if len(slices.Compact(sorted)) != len(want) {
			resp.Error, resp.ErrorMessage = ecInvalid, errors.New("a user is listed twice").Error()
			return resp
		}
		users = want
	}
	for _, u := range users {
		res := &twinlogv1.DescribeUserScramCredentialsResult{User: u, Credentials: byUser[u]}
		if len(res.Credentials) == 0 {
			res.Error, res.ErrorMessage = ecResourceNotFound, fmt.Sprintf("user %q has no SCRAM credential", u)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}
