package boltstore

import bolt "go.etcd.io/bbolt"

// SetPackCounts is a test hook: it overwrites the counts the store in dir
// keeps for pack n (blocks, bytes and committed end), as one wrong number
// in the database would, so that tests can check that nothing trusts
// them over the index. Nothing but tests should call it.
func SetPackCounts(dir string, n, blocks, bytes, end uint64) error {
	s, err := Open(dir, &Options{Command: "set pack counts (test hook)"})
	if err != nil {
		return err
	}
	err = update(s.db, func(tx *bolt.Tx) error {
		return putPackStat(tx, n, packStat{live: blocks, liveBytes: bytes, end: end})
	})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}
