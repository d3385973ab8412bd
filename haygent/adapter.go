package haygent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/haygent/hg/haygent/sandbox"
)

// SlotRequest is what an adapter is asked: the slot's prompt, the
// projection of the run it may see, the schema its answer must fit, and
// the errors of its previous try, if any.
type SlotRequest struct {
	Slot       string         `json:"slot"`
	Prompt     string         `json:"prompt"`
	Projection map[string]any `json:"projection"`
	Schema     map[string]any `json:"schema"`
	Try        int            `json:"try"`
	Errors     []string       `json:"errors,omitempty"`
}

// Adapter proposes values for a slot. It returns the raw response; the
// runtime alone decides what, if anything, it is worth.
type Adapter interface {
	// Name identifies the adapter in the ledger: "script", "exec:CMD",
	// "openai".
	Name() string
	// Model names the model, or "" when there is none.
	Model() string
	// Propose asks for a proposal. An error is a failed try.
	Propose(ctx context.Context, req SlotRequest) ([]byte, error)
}

// ScriptAdapter replays recorded proposals: for each slot, a list of raw
// responses handed out in order. It is how tests and replays feed slots.
// Its file is JSON: {"slots": {"fix": [<response>, ...]}}, where a
// response that is a JSON string is given as that text (so a script can
// hold what a model might say) and any other value as its JSON.
type ScriptAdapter struct {
	mu    sync.Mutex
	slots map[string][]json.RawMessage
	next  map[string]int
}

// LoadScript reads a script file.
func LoadScript(path string) (*ScriptAdapter, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Slots map[string][]json.RawMessage `json:"slots"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("script %s: %w", path, err)
	}
	return NewScript(doc.Slots), nil
}

// NewScript returns a ScriptAdapter over the given responses.
func NewScript(slots map[string][]json.RawMessage) *ScriptAdapter {
	if slots == nil {
		slots = map[string][]json.RawMessage{}
	}
	return &ScriptAdapter{slots: slots, next: map[string]int{}}
}

func (a *ScriptAdapter) Name() string  { return "script" }
func (a *ScriptAdapter) Model() string { return "" }

// Propose returns the slot's next recorded response.
func (a *ScriptAdapter) Propose(_ context.Context, req SlotRequest) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	list := a.slots[req.Slot]
	i := a.next[req.Slot]
	if i >= len(list) {
		return nil, fmt.Errorf("script has no more responses for slot %q (%d used)", req.Slot, i)
	}
	a.next[req.Slot] = i + 1
	var text string
	if json.Unmarshal(list[i], &text) == nil {
		return []byte(text), nil
	}
	return list[i], nil
}

// ExecAdapter runs a command for each proposal: the [SlotRequest] as JSON
// on stdin, the response on stdout. The command runs with a scrubbed
// environment and a time limit.
type ExecAdapter struct {
	Argv    []string
	Env     map[string]string
	Timeout time.Duration
}

func (a *ExecAdapter) Name() string  { return "exec:" + strings.Join(a.Argv, " ") }
func (a *ExecAdapter) Model() string { return "" }

// Propose runs the command.
func (a *ExecAdapter) Propose(ctx context.Context, req SlotRequest) ([]byte, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hg-adapter-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	timeout := a.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	env := sandbox.DefaultEnv(a.Env)
	env["HOME"] = dir
	res, err := sandbox.Run(ctx, sandbox.Spec{Argv: a.Argv, Dir: dir, Env: env, Timeout: timeout, Stdin: in})
	if err != nil {
		return nil, err
	}
	if res.TimedOut {
		return nil, fmt.Errorf("adapter %s timed out after %s", a.Argv[0], timeout)
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("adapter %s exited %d: %s", a.Argv[0], res.ExitCode, firstLine(res.Stderr))
	}
	return res.Stdout, nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// OpenAIAdapter calls an OpenAI-compatible chat-completions endpoint
// (OpenAI, Ollama, vLLM, llama.cpp) with a JSON-schema response format.
// The key is a secret: it is sent in the Authorization header and never
// recorded.
type OpenAIAdapter struct {
	BaseURL   string // e.g. https://api.openai.com/v1 or http://localhost:11434/v1
	Key       string
	ModelName string
	Client    *http.Client
}

// NewOpenAIFromEnv configures the adapter from HG_OPENAI_BASE_URL (or
// OPENAI_BASE_URL), HG_OPENAI_API_KEY (or OPENAI_API_KEY) and the model
// given, else HG_OPENAI_MODEL.
func NewOpenAIFromEnv(model string) (*OpenAIAdapter, error) {
	env := func(names ...string) string {
		for _, n := range names {
			if v := os.Getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	a := &OpenAIAdapter{
		BaseURL:   env("HG_OPENAI_BASE_URL", "OPENAI_BASE_URL"),
		Key:       env("HG_OPENAI_API_KEY", "OPENAI_API_KEY"),
		ModelName: model,
	}
	if a.ModelName == "" {
		a.ModelName = env("HG_OPENAI_MODEL")
	}
	if a.BaseURL == "" {
		a.BaseURL = "https://api.openai.com/v1"
	}
	if a.ModelName == "" {
		return nil, errors.New("openai adapter: no model (pass --model or set HG_OPENAI_MODEL)")
	}
	return a, nil
}

func (a *OpenAIAdapter) Name() string  { return "openai" }
func (a *OpenAIAdapter) Model() string { return a.ModelName }

// Propose sends one chat completion request and returns the message
// content.
func (a *OpenAIAdapter) Propose(ctx context.Context, req SlotRequest) ([]byte, error) {
	user, err := json.Marshal(map[string]any{"projection": req.Projection, "errors_of_previous_try": req.Errors})
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(map[string]any{
		"model": a.ModelName,
		"messages": []map[string]string{
			{"role": "system", "content": req.Prompt},
			{"role": "user", "content": string(user)},
		},
		"response_format": map[string]any{
			"type":        "json_schema",
			"json_schema": map[string]any{"name": req.Slot, "schema": req.Schema, "strict": true},
		},
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(a.BaseURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	if a.Key != "" {
		hreq.Header.Set("Authorization", "Bearer "+a.Key)
	}
	client := a.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("openai adapter: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("openai adapter: %s: %s", resp.Status, firstLine(raw))
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
				Refusal string `json:"refusal"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) == 0 {
		return nil, fmt.Errorf("openai adapter: unexpected response: %s", firstLine(raw))
	}
	if r := out.Choices[0].Message.Refusal; r != "" {
		return nil, fmt.Errorf("openai adapter: model refused: %s", r)
	}
	return []byte(out.Choices[0].Message.Content), nil
}
