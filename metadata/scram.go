package metadata

import (
	"cmp"
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/scram"
)

// ScramKey names one SCRAM credential: a user and a mechanism.
type ScramKey struct {
	User      string
	Mechanism twinlogv1.ScramMechanism
}

func scramKeyOf(r *twinlogv1.UserScramCredentialRecord) ScramKey {
	return ScramKey{r.GetName(), r.GetMechanism()}
}

// ScramCredential returns user's credential for m, nil if none.
func (img *Image) ScramCredential(user string, m twinlogv1.ScramMechanism) *twinlogv1.UserScramCredentialRecord {
	return img.scram[ScramKey{user, m}]
}

// ScramCredentials returns every credential, by user then mechanism.
func (img *Image) ScramCredentials() []*twinlogv1.UserScramCredentialRecord {
	out := make([]*twinlogv1.UserScramCredentialRecord, 0, len(img.scram))
	for _, r := range img.scram {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *twinlogv1.UserScramCredentialRecord) int {
		return cmp.Or(cmp.Compare(a.GetName(), b.GetName()), cmp.Compare(a.GetMechanism(), b.GetMechanism()))
	})
	return out
}

// ScramCount returns how many credentials the image holds.
func (img *Image) ScramCount() int { return len(img.scram) }

func (img *Image) applyScram(d *twinlogv1.MetadataDelta) {
	for _, r := range d.GetRemovedScramCredentials() {
		delete(img.scram, scramKeyOf(r))
	}
	for _, r := range d.GetScramCredentials() {
		img.scram[scramKeyOf(r)] = r
	}
}

// ScramLookup returns a credential lookup over img for SASL
// authentication (security/scram). Each call reads img: the caller
// serialises calls with img's owner.
func ScramLookup(img *Image) scram.Lookup {
	return func(user string, m scram.Mechanism) (scram.Credential, bool) {
		r := img.ScramCredential(user, twinlogv1.ScramMechanism(m.KafkaCode()))
		if r == nil {
			return scram.Credential{}, false
		}
		return scram.Credential{Mechanism: m, Salt: r.GetSalt(), StoredKey: r.GetStoredKey(), ServerKey: r.GetServerKey(), Iterations: r.GetIterations()}, true
	}
}
