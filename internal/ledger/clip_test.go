package ledger_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/buyflow/buyflow/internal/record"
)

func TestClipBoundsBytesAtACharacterBoundary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		// "é" is two bytes: a cut inside it keeps the whole character out.
		{"aéb", 2, "a…"},
		{"日本語", 4, "日…"},
		{"日本語", 0, "…"},
	} {
		got := record.Clip(tc.in, tc.n)
		if got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
	long := strings.Repeat("ü", 1000)
	if got := record.Clip(long, 1000); len(got) > 1000+len("…") || !utf8.ValidString(got) {
		t.Errorf("Clip of 2000 bytes to 1000 = %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if got := record.EventDetail(map[string]any{"bad": func() {}}); got != nil {
		t.Errorf("EventDetail of an unencodable value = %s, want no detail", got)
	}
}
