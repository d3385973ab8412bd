package perm_test

import (
	"errors"
	"fmt"

	"github.com/haygent/hg/haygent/perm"
)

func Example() {
	set, err := perm.Parse([]byte(`{
  "grants":   ["read:file:project/**", "write:file:generated/**", "run:command:go-test", "network:none"],
  "deny":     ["read:file:project/.env"],
  "commands": {"go-test": ["go", "test", "-json", "./..."]}
}`))
	if err != nil {
		panic(err)
	}
	for _, op := range []perm.Op{
		{Verb: "read", Kind: "file", Target: "project/main.go"},
		{Verb: "read", Kind: "file", Target: "project/.env"},
		{Verb: "write", Kind: "file", Target: "project/main.go"},
		{Verb: "network", Kind: "host", Target: "example.com:443"},
		{Verb: "read", Kind: "file", Target: "../etc/passwd"},
	} {
		d := set.Check(op)
		fmt.Printf("%-30s %-5v %s\n", op, d.Allowed, d.Rule)
	}
	argv, _ := set.Command("go-test")
	fmt.Println(argv)
	_, err = set.Command("rm")
	fmt.Println(errors.Is(err, perm.ErrDenied))
	// Output:
	// read:file:project/main.go      true  read:file:project/**
	// read:file:project/.env         false read:file:project/.env
	// write:file:project/main.go     false default deny
	// network:host:example.com:443   false network:none
	// read:file:../etc/passwd        false invalid target: "../etc/passwd": holds a ".." segment
	// [go test -json ./...]
	// true
}
