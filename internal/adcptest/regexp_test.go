package adcptest

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
		re, err := compileRegexp(tt.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tt.pattern, err)
		}
		if got := re.MatchString(tt.in); got != tt.want {
			t.Errorf("%s on %q = %v, want %v", tt.pattern, tt.in, got, tt.want)
		}
	}
}
