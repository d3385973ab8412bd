package haygent_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/haygent"
)

// The openai adapter speaks the chat-completions protocol with a
// JSON-schema response format, and sends the key only in the header.
func TestOpenAIAdapter(t *testing.T) {
	var got map[string]any
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		auth = r.Header.Get("Authorization")
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &got)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"{\"factor\": 2}"}}]}`)
	}))
	defer srv.Close()
	t.Setenv("HG_OPENAI_BASE_URL", srv.URL+"/v1")
	t.Setenv("HG_OPENAI_API_KEY", "sk-test-123")
	a, err := haygent.NewOpenAIFromEnv("tiny-model")
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.Propose(context.Background(), haygent.SlotRequest{
		Slot: "fix", Prompt: "fix it", Projection: map[string]any{"/adjustable": map[string]any{"factor": 3}},
		Schema: map[string]any{"type": "object"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"factor": 2}` {
		t.Fatalf("response %q", out)
	}
	if auth != "Bearer sk-test-123" {
		t.Errorf("authorization %q", auth)
	}
	if got["model"] != "tiny-model" {
		t.Errorf("model %v", got["model"])
	}
	rf, _ := got["response_format"].(map[string]any)
	if rf["type"] != "json_schema" {
		t.Errorf("response_format %v", rf)
	}
	msgs, _ := json.Marshal(got["messages"])
	if strings.Contains(string(msgs), "sk-test-123") {
		t.Error("the key reached the messages")
	}
	if a.Name() != "openai" || a.Model() != "tiny-model" {
		t.Errorf("name %q model %q", a.Name(), a.Model())
	}
}

func TestOpenAIAdapterErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"overloaded"}`, http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	a := &haygent.OpenAIAdapter{BaseURL: srv.URL, ModelName: "m"}
	if _, err := a.Propose(context.Background(), haygent.SlotRequest{Slot: "s"}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("got %v, want the 503", err)
	}
	t.Setenv("HG_OPENAI_MODEL", "")
	if _, err := haygent.NewOpenAIFromEnv(""); err == nil {
		t.Fatal("no model: want an error")
	}
}

// The exec adapter hands the request to a command on stdin and takes its
// stdout as the response.
func TestExecAdapter(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "propose.sh")
	os.WriteFile(script, []byte("#!/bin/sh\nread req\ncase \"$req\" in *'\"slot\":\"fix\"'*) echo '{\"factor\": 2}';; *) echo nope; exit 3;; esac\n"), 0o755)
	a := &haygent.ExecAdapter{Argv: []string{script}}
	out, err := a.Propose(context.Background(), haygent.SlotRequest{Slot: "fix"})
	if err != nil || strings.TrimSpace(string(out)) != `{"factor": 2}` {
		t.Fatalf("got %q, %v", out, err)
	}
	if _, err := a.Propose(context.Background(), haygent.SlotRequest{Slot: "other"}); err == nil || !strings.Contains(err.Error(), "exited 3") {
		t.Fatalf("got %v, want exit 3", err)
	}
}
