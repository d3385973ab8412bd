package sandbox

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	const s = "s3cr3t-v@lue"
	basic := base64.StdEncoding.EncodeToString([]byte("user:" + s))
	for _, c := range []struct {
		name    string
		in      string
		secrets []string
		want    string
	}{
		{"none", "nothing here", []string{s}, "nothing here"},
		{"no secrets", "s3cr3t-v@lue", nil, "s3cr3t-v@lue"},
		{"empty secret ignored", "abc", []string{""}, "abc"},
		{"raw", "a " + s + " b " + s, []string{s}, "a [REDACTED] b [REDACTED]"},
		{"adjacent", s + s, []string{s}, "[REDACTED]"},
		{"overlapping", "aaa", []string{"aa"}, "[REDACTED]"},
		{"nested", "xabcdefx", []string{"cd", "abcdef"}, "x[REDACTED]x"},
		{"overlapping secrets", "xabcdex", []string{"abcd", "cde"}, "x[REDACTED]x"},
		{"hex", "h=" + hex.EncodeToString([]byte(s)), []string{s}, "h=[REDACTED]"},
		{"HEX", "h=" + strings.ToUpper(hex.EncodeToString([]byte(s))), []string{s}, "h=[REDACTED]"},
		{"base64", "b=" + base64.StdEncoding.EncodeToString([]byte(s)), []string{s}, "b=[REDACTED]"},
		{"base64 padded", "b=" + base64.StdEncoding.EncodeToString([]byte(s+"!")), []string{s}, "b=[REDACTED]IQ=="},
		// 2 bytes before s: "__5" holds bits of them, "U" of what follows.
		{"base64url", "b=" + base64.RawURLEncoding.EncodeToString([]byte("\xff\xfe"+s)), []string{s}, "b=__5[REDACTED]U"},
		{"basic auth", "Authorization: Basic " + basic, []string{s}, ""},
		{"query escape", "u=" + url.QueryEscape(s), []string{s}, "u=[REDACTED]"},
		{"short secret, raw only", "ab " + hex.EncodeToString([]byte("ab")), []string{"ab"}, "[REDACTED] 6162"},
	} {
		got := string(Redact([]byte(c.in), c.secrets))
		if c.want == "" {
			// Only check that no trace of the value is left.
			if strings.Contains(got, basic) || !strings.Contains(got, Redacted) {
				t.Errorf("%s: %q -> %q", c.name, c.in, got)
			}
			continue
		}
		if got != c.want {
			t.Errorf("%s: Redact(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

func TestRedactEveryAlignment(t *testing.T) {
	s := "correct horse battery staple"
	for pre := range 6 {
		for post := range 6 {
			plain := strings.Repeat("p", pre) + s + strings.Repeat("q", post)
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawURLEncoding} {
				e := enc.EncodeToString([]byte(plain))
				got := string(Redact([]byte(e), []string{s}))
				if !strings.Contains(got, Redacted) {
					t.Errorf("pre %d post %d: %q not redacted", pre, post, e)
				}
				// What is left is no more than the characters holding
				// bits of the text around the value, and padding.
				parts := strings.Split(got, Redacted)
				left, right := parts[0], parts[len(parts)-1]
				if len(parts) != 2 || len(left) > (8*pre+5)/6 || len(right) > (8*post+5)/6+1+2 {
					t.Errorf("pre %d post %d: %q -> %q", pre, post, e, got)
				}
			}
		}
	}
}

func TestRedactUpTo(t *testing.T) {
	forms := secretForms([]string{"SECRET"})
	for _, c := range []struct {
		in   string
		cut  int
		want string
	}{
		{"abcSECRETdef", 12, "abc[REDACTED]def"},
		{"abcSECRETdef", 3, "abc"},
		{"abcSECRETdef", 4, "abc[REDACTED]"},
		{"abcSECRETdef", 9, "abc[REDACTED]"},
		{"abcSECRETdef", 10, "abc[REDACTED]d"},
		{"abcSECRETSECRETdef", 10, "abc[REDACTED]"},
	} {
		if got := string(redactUpTo([]byte(c.in), forms, c.cut)); got != c.want {
			t.Errorf("redactUpTo(%q, %d) = %q, want %q", c.in, c.cut, got, c.want)
		}
	}
}

func TestRedactDoesNotModify(t *testing.T) {
	in := []byte("a secret b")
	Redact(in, []string{"secret"})
	if string(in) != "a secret b" {
		t.Errorf("input changed to %q", in)
	}
}

func FuzzRedact(f *testing.F) {
	f.Add([]byte("token=abc123 and abc123abc"), "abc123", "c12")
	f.Add([]byte("aaaaaaa"), "aa", "a")
	f.Fuzz(func(t *testing.T, b []byte, s1, s2 string) {
		got := Redact(b, []string{s1, s2})
		for _, s := range []string{s1, s2} {
			// A mark can itself hold a value ("E", "[RED"), and can meet
			// the text around it to form one; only check values the
			// marks cannot make.
			if s == "" || strings.ContainsAny(s, "[]REDACT") {
				continue
			}
			if bytes.Contains(got, []byte(s)) {
				t.Errorf("Redact(%q, %q, %q) = %q still holds %q", b, s1, s2, got, s)
			}
		}
	})
}
