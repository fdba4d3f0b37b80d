package ecmaregexp

import "testing"

func TestLookaheadRegexp(t *testing.T) {
	const iso = `^P(?!$)(\d+Y)?(\d+M)?(\d+D)?(T(\d+H)?(\d+M)?(\d+S)?)?$`
	tests := []struct {
		pattern, in string
		want        bool
	}{
		{iso, "P1D", true},
		{iso, "PT30M", true},
		{iso, "P", false},
		{iso, "1D", false},
		{`^[a-z]+$`, "abc", true},
	}
	for _, tt := range tests {
		re, err := Compile(tt.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tt.pattern, err)
		}
		if got := re.MatchString(tt.in); got != tt.want {
			t.Errorf("%s on %q = %v, want %v", tt.pattern, tt.in, got, tt.want)
		}
	}
}

// The 3.2.3 schemas write control characters as ECMA-262 \uXXXX escapes (core/macro-bearing-url
// and others), which RE2 refuses as they are.
func TestUnicodeEscapes(t *testing.T) {
	const url = `^https?://[^\s\u0000-\u001F\u007F"<>]+$`
	tests := []struct {
		pattern, in string
		want        bool
	}{
		{url, "https://example.com/a", true},
		{url, "https://example.com/\x01", false},
		{url, "https://example.com/\x7f", false},
		{`^\u00e9$`, "é", true},
		{`^\\u0041$`, `\u0041`, true}, // an escaped backslash then a literal u0041
		{`^\\u0041$`, "A", false},
	}
	for _, tt := range tests {
		re, err := Compile(tt.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tt.pattern, err)
		}
		if got := re.MatchString(tt.in); got != tt.want {
			t.Errorf("%s on %q = %v, want %v", tt.pattern, tt.in, got, tt.want)
		}
	}
	if _, err := Compile(`^\u12$`); err == nil {
		t.Error("a short \\u escape compiled")
	}
}
