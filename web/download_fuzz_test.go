package web

import (
	"mime"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzContentDisposition: whatever a stored file's name holds (quotes,
// semicolons, line breaks, percent signs, any bytes), the header holds
// no control character or byte outside ASCII, parses as one attachment,
// and gives the name back exactly (RFC 2231's filename*), so that a name
// can neither add a header nor a parameter.
func FuzzContentDisposition(f *testing.F) {
	for _, s := range []string{"report.txt", `a"; filename=evil.html`, "x\r\nSet-Cookie: a=b", "%41%", "naïve résumé.pdf", "\u202eexe.txt", "a\\b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if !utf8.ValidString(name) {
			return // tree names are valid UTF-8 (cas.CheckName)
		}
		h := contentDisposition(name)
		for i := 0; i < len(h); i++ {
			if h[i] < 0x20 || h[i] >= 0x7f {
				t.Fatalf("%q: byte %#x in the header %q", name, h[i], h)
			}
		}
		disp, params, err := mime.ParseMediaType(h)
		if err != nil || disp != "attachment" {
			t.Fatalf("%q: %q does not parse: %v", name, h, err)
		}
		if params["filename"] != name {
			t.Fatalf("%q: the header %q gives back %q", name, h, params["filename"])
		}
		if strings.Count(h, ";") != 2 {
			t.Fatalf("%q: %q has more parameters than two", name, h)
		}
	})
}
