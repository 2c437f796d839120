package cfaccess

import (
	"crypto/sha256"
	"sync"
	"time"
)

// verifiedMax bounds the assertions remembered; past it, the memory starts
// again empty. Access sends one assertion for a whole session, so a server
// holds about one per agent.
const verifiedMax = 1024

// verified remembers assertions that verified, by their SHA-256: Access sends
// the same assertion on every request of a session, and checking it again
// costs an RSA verification each time. An entry is used only until the
// assertion's exp (with Leeway), and only while its key is still one the team
// publishes (Verify asks the key cache), so a remembered assertion verifies
// exactly when a fresh check of it would.
type verified struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]verifiedEntry
}

type verifiedEntry struct {
	id  Identity
	kid string
	exp time.Time
}

func (v *verified) get(sum [sha256.Size]byte, now time.Time) (verifiedEntry, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.m[sum]
	if ok && now.After(e.exp.Add(Leeway)) {
		delete(v.m, sum)
		return verifiedEntry{}, false
	}
	return e, ok
}

func (v *verified) put(sum [sha256.Size]byte, e verifiedEntry) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil || len(v.m) >= verifiedMax {
		v.m = make(map[[sha256.Size]byte]verifiedEntry)
	}
	v.m[sum] = e
}
