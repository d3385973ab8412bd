package boltstore

import (
	"context"
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	bolt "go.etcd.io/bbolt"
)

// SetPin makes name point at c, replacing any earlier target. The name
// must pass [cas.CheckPinName]; c need not be stored.
func (s *Store) SetPin(ctx context.Context, name string, c cid.Cid) error {
	if err := cas.CheckPinName(name); err != nil {
		return err
	}
	end, err := s.begin(ctx, true)
	if err != nil {
		return err
	}
	defer end()
	return update(s.db, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPins).Put([]byte(name), c.Bytes())
	})
}

// DeletePin removes the pin; a missing pin is an error wrapping
// [cas.ErrNotFound].
func (s *Store) DeletePin(ctx context.Context, name string) error {
	end, err := s.begin(ctx, true)
	if err != nil {
		return err
	}
	defer end()
	return update(s.db, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPins)
		if b.Get([]byte(name)) == nil {
			return fmt.Errorf("pin %q: %w", name, cas.ErrNotFound)
		}
		return b.Delete([]byte(name))
	})
}

// Pin returns the CID the pin name points at, from a single lookup; a
// missing pin is an error wrapping [cas.ErrNotFound].
func (s *Store) Pin(ctx context.Context, name string) (cid.Cid, error) {
	return s.getName(ctx, func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bucketPins) }, name, func() error {
		return fmt.Errorf("pin %q: %w", name, cas.ErrNotFound)
	})
}

// Pins returns every pin, sorted by name.
func (s *Store) Pins(ctx context.Context) ([]cas.Pin, error) {
	end, err := s.begin(ctx, false)
	if err != nil {
		return nil, err
	}
	defer end()
	var out []cas.Pin
	err = view(s.db, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPins).ForEach(func(k, v []byte) error {
			c, err := cas.CastCID(v)
			if err != nil {
				return fmt.Errorf("store %s: pin %q: %w", s.dir, k, err)
			}
			out = append(out, cas.Pin{Name: string(k), CID: c})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []cas.Pin{}
	}
	return out, nil
}

// SetRef makes ns/name point at c, in one synced transaction.
func (s *Store) SetRef(ctx context.Context, ns, name string, c cid.Cid) error {
	return s.SetRefs(ctx, cas.Ref{NS: ns, Name: name, CID: c})
}

// SetRefs sets every ref in one synced transaction: all or none.
func (s *Store) SetRefs(ctx context.Context, refs ...cas.Ref) error {
	if err := cas.CheckRefs(refs); err != nil {
		return err
	}
	end, err := s.begin(ctx, true)
	if err != nil {
		return err
	}
	defer end()
	return update(s.db, func(tx *bolt.Tx) error {
		for _, r := range refs {
			b, err := tx.Bucket(bucketRefs).CreateBucketIfNotExists([]byte(r.NS))
			if err != nil {
				return err
			}
			if err := b.Put([]byte(r.Name), r.CID.Bytes()); err != nil {
				return err
			}
		}
		return nil
	})
}

// GetRef returns the CID ns/name points at.
func (s *Store) GetRef(ctx context.Context, ns, name string) (cid.Cid, error) {
	return s.getName(ctx, func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bucketRefs).Bucket([]byte(ns)) }, name, func() error {
		return fmt.Errorf("ref %s/%s: %w", ns, name, cas.ErrNotFound)
	})
}

// getName returns the CID stored under name in the bucket that in finds
// (nil if there is none): one lookup in one read transaction. A missing
// name is the error notFound returns.
func (s *Store) getName(ctx context.Context, in func(*bolt.Tx) *bolt.Bucket, name string, notFound func() error) (cid.Cid, error) {
	end, err := s.begin(ctx, false)
	if err != nil {
		return cid.Undef, err
	}
	defer end()
	var c cid.Cid
	err = view(s.db, func(tx *bolt.Tx) error {
		var v []byte
		if b := in(tx); b != nil {
			v = b.Get([]byte(name))
		}
		if v == nil {
			return notFound()
		}
		var err error
		c, err = cas.CastCID(v)
		return err
	})
	return c, err
}

// DeleteRef removes ns/name.
func (s *Store) DeleteRef(ctx context.Context, ns, name string) error {
	end, err := s.begin(ctx, true)
	if err != nil {
		return err
	}
	defer end()
	return update(s.db, func(tx *bolt.Tx) error {
		refs := tx.Bucket(bucketRefs)
		b := refs.Bucket([]byte(ns))
		if b == nil || b.Get([]byte(name)) == nil {
			return fmt.Errorf("ref %s/%s: %w", ns, name, cas.ErrNotFound)
		}
		if err := b.Delete([]byte(name)); err != nil {
			return err
		}
		if k, _ := b.Cursor().First(); k == nil {
			return refs.DeleteBucket([]byte(ns))
		}
		return nil
	})
}

// Refs returns the refs of ns, sorted by name.
func (s *Store) Refs(ctx context.Context, ns string) ([]cas.Pin, error) {
	if err := cas.CheckRefNamespace(ns); err != nil {
		return nil, err
	}
	end, err := s.begin(ctx, false)
	if err != nil {
		return nil, err
	}
	defer end()
	out := []cas.Pin{}
	err = view(s.db, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRefs).Bucket([]byte(ns))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			c, err := cas.CastCID(v)
			if err != nil {
				return fmt.Errorf("store %s: ref %s/%s: %w", s.dir, ns, k, err)
			}
			out = append(out, cas.Pin{Name: string(k), CID: c})
			return nil
		})
	})
	return out, err
}

// RefNamespaces returns the namespaces holding refs, sorted.
func (s *Store) RefNamespaces(ctx context.Context) ([]string, error) {
	end, err := s.begin(ctx, false)
	if err != nil {
		return nil, err
	}
	defer end()
	out := []string{}
	err = view(s.db, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRefs).ForEachBucket(func(k []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	return out, err
}
