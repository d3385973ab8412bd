package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/haygent/hg/haygent/ledger"
	"github.com/spf13/cobra"
)

func newKeyCmd(g *globals) *cobra.Command {
	gen := &cobra.Command{
		Use:   "gen",
		Short: "make the store's runner signing key (ed25519)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := locateStore(g.store)
			if err != nil {
				return err
			}
			return printRunnerKey(g, ledger.GenerateKey, keyPath(dir))
		},
	}
	show := &cobra.Command{
		Use:   "show",
		Short: "print the store's runner public key",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := locateStore(g.store)
			if err != nil {
				return err
			}
			return printRunnerKey(g, ledger.LoadKey, keyPath(dir))
		},
	}
	trust := &cobra.Command{
		Use:   "trust PUBKEY|FILE",
		Short: "trust receipts signed by another runner's key (hg verify)",
		Long: `Add PUBKEY (ed25519:..., as 'hg key show' prints it on the other machine),
or every key listed in FILE (one per line), to the store's trust file,
keys/trusted: hg verify then accepts receipts they signed, as it does
those of the store's own key.`,
		Args: exactArgs(1, "one PUBKEY or FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := locateStore(g.store)
			if err != nil {
				return err
			}
			keys, err := keysArg(args[0])
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := addTrusted(dir, k); err != nil {
					return err
				}
				g.ui.printf("trusted %s\n", ledger.FormatPublicKey(k))
			}
			return nil
		},
	}
	return groupCmd("key", "the runner's signing key, and the keys this store trusts", gen, show, trust, newKeyUntrustCmd(g))
}

// newKeyUntrustCmd withdraws keys from the store's trust file.
func newKeyUntrustCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "untrust PUBKEY|FILE",
		Short: "stop trusting another runner's key",
		Long: `Remove PUBKEY, or every key listed in FILE, from the store's trust file:
hg verify and hg recheck no longer accept receipts they signed. Runs already
done are not changed until 'hg recheck RUN' measures them again. The store's
own runner key is always trusted: make a new one instead.`,
		Args: exactArgs(1, "one PUBKEY or FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := locateStore(g.store)
			if err != nil {
				return err
			}
			keys, err := keysArg(args[0])
			if err != nil {
				return err
			}
			if own, err := ledger.LoadKey(keyPath(dir)); err == nil {
				for _, k := range keys {
					if k.Equal(own.Public()) {
						return fmt.Errorf("%s is the store's own runner key, which is always trusted", ledger.FormatPublicKey(k))
					}
				}
			}
			removed, err := removeTrusted(dir, keys)
			if err != nil {
				return err
			}
			for _, k := range keys {
				if removed[ledger.FormatPublicKey(k)] {
					g.ui.printf("untrusted %s\n", ledger.FormatPublicKey(k))
				} else {
					g.ui.printf("not trusted: %s\n", ledger.FormatPublicKey(k))
				}
			}
			return nil
		},
	}
}

// removeTrusted rewrites the store's trust file without keys, and says
// which of them it held.
func removeTrusted(storeDir string, keys []ed25519.PublicKey) (map[string]bool, error) {
	path := trustFile(storeDir)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	drop := map[string]bool{}
	for _, k := range keys {
		drop[ledger.FormatPublicKey(k)] = true
	}
	removed := map[string]bool{}
	var kept []string
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if k, err := ledger.ParsePublicKey(strings.TrimSpace(line)); err == nil && drop[ledger.FormatPublicKey(k)] {
			removed[ledger.FormatPublicKey(k)] = true
			continue
		}
		kept = append(kept, line)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".trusted-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(strings.Join(kept, "")); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	return removed, os.Rename(tmp.Name(), path)
}

// printRunnerKey prints the public half of the runner key that get makes
// or reads at path.
func printRunnerKey(g *globals, get func(string) (ed25519.PrivateKey, error), path string) error {
	key, err := get(path)
	if err != nil {
		return err
	}
	g.ui.printf("%s\n", ledger.FormatPublicKey(key.Public().(ed25519.PublicKey)))
	return nil
}

// keysArg reads the PUBKEY|FILE argument of hg key trust and untrust: one
// key, or every key a file lists (one per line).
func keysArg(arg string) ([]ed25519.PublicKey, error) {
	if k, err := ledger.ParsePublicKey(arg); err == nil {
		return []ed25519.PublicKey{k}, nil
	} else if _, serr := os.Stat(arg); serr != nil {
		return nil, usageError{err}
	}
	keys, err := readTrustFile(arg)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s lists no keys", arg)
	}
	return keys, nil
}
