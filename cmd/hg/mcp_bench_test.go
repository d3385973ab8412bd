package main

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPCall measures one tool call through the SDK's client and
// in-memory transports, the store opened and closed for each: status
// runs hg status --json in the process, get reads a small file.
func BenchmarkMCPCall(b *testing.B) {
	f := newMCPFixture(b)
	cs := f.connect(b, mcpOptions{})
	var sub submitOut
	call(b, cs, "submit", map[string]any{"workorder": "workorders/release.json",
		"answers": map[string]any{"platform": "linux", "channel": "beta", "retention": 30}}, &sub)
	if st := waitRun(b, cs, sub.Run); st.Status != "done" {
		b.Fatalf("run: %+v", st)
	}
	f.write(b, "a.txt", "hello\n")
	var put putOut
	call(b, cs, "put", map[string]any{"path": "a.txt"}, &put)
	for _, bc := range []struct {
		name string
		args map[string]any
	}{
		{"status", map[string]any{"run": sub.Run}},
		{"get", map[string]any{"ref": put.CID}},
		{"verify", map[string]any{"ref": sub.Run}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: bc.name, Arguments: bc.args})
				if err != nil || res.IsError {
					b.Fatalf("%s: %v %v", bc.name, err, res)
				}
			}
		})
	}
}
