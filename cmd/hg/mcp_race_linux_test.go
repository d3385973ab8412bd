package main

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// TestMCPPutTreeSwapRace: while a client puts the tree rd/d, another
// process keeps exchanging the directory rd with a symlink to a
// directory outside the root (renameat2 RENAME_EXCHANGE, atomic). Each
// put stores the tree inside or is refused; nothing outside the root is
// ever stored.
func TestMCPPutTreeSwapRace(t *testing.T) {
	f := newMCPFixture(t)
	outside := t.TempDir()
	secret := "TOP SECRET OUTSIDE"
	f.write(t, "rd/d/inside.txt", "inside\n")
	if err := os.MkdirAll(filepath.Join(outside, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "d", "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	rd, link := filepath.Join(f.root, "rd"), filepath.Join(f.root, "rd.link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	cs := f.connect(t, mcpOptions{})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, rd, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("renameat2: %v", err)
				return
			}
		}
	}()
	stored := 0
	for range 400 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "put", Arguments: map[string]any{"path": "rd/d"}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError {
			stored++
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d of 400 puts stored a tree", stored)
	if storeHolds(t, f.store, []byte(secret)) {
		t.Fatal("a put stored a file from outside the root")
	}
	if !storeHolds(t, f.store, []byte("inside\n")) {
		t.Fatal("no put stored the tree inside the root: the race was not run")
	}
}
