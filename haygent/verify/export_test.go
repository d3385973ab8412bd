package verify

import "github.com/haygent/hg/haygent/ledger"

// ForgetSignatures drops the signatures c remembers, keeping its compiled
// gates: the next verification checks ed25519 in full, as a verifier on
// another machine does. Benchmarks of verification use it.
func (c *Cache) ForgetSignatures() { c.sigs = ledger.NewSignatures() }
