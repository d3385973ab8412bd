package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/haygent/hg/web"
	"github.com/spf13/cobra"
)

// serveOpenTimeout is how long a page waits for a writer that holds the
// store (hg run holds it for one short transaction at a time).
const serveOpenTimeout = 2 * time.Second

func newServeCmd(g *globals) *cobra.Command {
	var addr, token string
	cmd := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:8040] [--token TOKEN]",
		Short: "serve a read-only view of the store's runs, receipts and their verification in a browser",
		Long: `Serve a read-only web view of the store: the runs (newest first, filtered by
status and class), each run's DAG drawn with its nodes' states (live while
the run executes), its outcome and decisions, each node's receipt with its
transitions, evidence, gates, permissions used and denied, slot calls,
repairs, HALT reason and restart point, logs, and the workspace it left
(files downloadable), and the belief log of each task class.

Every receipt shown carries the verdict of hg's verifier, computed when the
page is served with the keys the store trusts then ('hg key trust'):
"verified", "signer not trusted", or "broken: " and the first check that
failed. PASS is shown only beside "verified".

The server never writes to the store: it opens it read-only for each page
and closes it, so that runs in progress go on. It is bound to loopback by
default and answers only to the host names of that address (a page
reached through another name is refused). Any other address requires a
token: --token, or one generated and printed once. The URL printed
carries it (?token=...); the browser keeps it as a cookie. Scripts send
"Authorization: Bearer TOKEN".

Stops on Ctrl-C or SIGTERM.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return serve(cmd.Context(), g, addr, token)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8040", "listen on `HOST:PORT` (port 0: any free port)")
	cmd.Flags().StringVar(&token, "token", "", "require `TOKEN` of every request (generated when the address is not loopback)")
	return cmd
}

// serve runs hg serve until ctx is done.
func serve(ctx context.Context, g *globals, addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError{fmt.Errorf("--addr %q: want HOST:PORT, such as 127.0.0.1:8040: %v", addr, err)}
	}
	loopback := isLoopback(host)
	if !loopback && token == "" {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		token = hex.EncodeToString(b)
	}
	dir, err := locateStore(g.store)
	if err != nil {
		return err
	}
	// The store must be one now; each page opens it again.
	st, err := g.openStore(true, commandLine(g.args))
	if err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	defer ln.Close()
	bound := ln.Addr().(*net.TCPAddr)
	cfg := serveConfig(dir, token, log.New(g.ui.stderr, "hg: serve: ", 0))
	if loopback {
		cfg.Hosts = loopbackHosts(host, bound.Port)
	}
	srv, err := web.New(cfg)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          cfg.ErrorLog,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	url := "http://" + net.JoinHostPort(displayHost(host, bound), fmt.Sprint(bound.Port)) + "/runs"
	if token != "" {
		url += "?token=" + token
	}
	g.ui.printf("%s\n", url)
	fmt.Fprintf(g.ui.stderr, "hg: serving %s read-only; Ctrl-C stops\n", textsafe.Escape(dir))
	if !loopback {
		g.ui.warnf("listening beyond loopback on %s: every request needs the token in the URL above (from another machine, with this one's name or address in it)", bound)
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	hs.Close() // live views still open
	return nil
}

// serveConfig is what hg serve serves of the store in dir: the store
// opened read-only for each page, the keys it trusts read again for each
// page, and runs' locks asked whether a process executes them.
func serveConfig(dir, token string, errLog *log.Logger) web.Config {
	return web.Config{
		Open: func(ctx context.Context) (cas.Store, error) {
			return boltstore.Open(dir, &boltstore.Options{ReadOnly: true, Timeout: serveOpenTimeout, Command: "hg serve"})
		},
		Trusted:   func() ([]ed25519.PublicKey, error) { return storeTrust(dir) },
		Executing: func(run string) bool { return runActive(dir, run) },
		Token:     token,
		ErrorLog:  errLog,
	}
}

// isLoopback reports whether host (of --addr) is a loopback address or
// localhost. An empty host listens on every interface: not loopback.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// loopbackHosts are the Host headers a loopback server answers to: its
// address and localhost, with the port. Any other name reaching it (a
// DNS name rebound to 127.0.0.1 by a page in the browser) is refused.
func loopbackHosts(host string, port int) []string {
	p := fmt.Sprint(port)
	hosts := []string{net.JoinHostPort(host, p), net.JoinHostPort("localhost", p), net.JoinHostPort("127.0.0.1", p), net.JoinHostPort("::1", p)}
	return hosts
}

// displayHost is the host of the URL printed: the one given, or, for an
// address of every interface (none given, 0.0.0.0, ::), 127.0.0.1: the
// URL then works on this machine, and elsewhere with its name in place.
func displayHost(host string, bound *net.TCPAddr) string {
	if host != "" && !bound.IP.IsUnspecified() {
		return host
	}
	return "127.0.0.1"
}
