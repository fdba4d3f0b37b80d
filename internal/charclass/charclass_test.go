package charclass

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// The classes buyflow checks with Span, and the ranges it checks them over.
var cases = []struct {
	spec     string
	min, max int
}{
	{"A-Za-z0-9_.:-", 16, 255}, {"A-Za-z0-9_.:-", 1, 255}, {"A-Za-z0-9_.:-", 8, 255}, {"A-Za-z0-9_-", 1, 64},
	{"A-Za-z0-9._-", 1, 64}, {"a-z0-9_", 0, 63}, {"A-Za-z0-9_.-", 0, 63}, {"A-Z0-9", 2, 20}, {"a-z2-7", 26, 26},
	{"A-Z", 3, 3}, {"-a", 1, 2}, {"A-Za-z0-9_+=,.@-", 2, 64}, {"A-Za-z0-9_+=,.@/-", 1, 512},
}

func TestSpanAgreesWithTheClass(t *testing.T) {
	for _, c := range cases {
		re := regexp.MustCompile(fmt.Sprintf(`^[%s]{%d,%d}$`, c.spec, c.min, c.max))
		s := Of(c.spec)
		for b := range 256 {
			for _, n := range []int{c.min, c.max} {
				str := strings.Repeat(string([]byte{byte(b)}), n)
				if got, want := s.Span(str, c.min, c.max), re.MatchString(str); got != want {
					t.Errorf("[%s]{%d,%d} on %d×%#x: Span says %v, the pattern %v", c.spec, c.min, c.max, n, b, got, want)
				}
			}
		}
	}
}

func TestOfRefusesWhatIsNotASCII(t *testing.T) {
	for _, spec := range []string{"é", "z-a", "a-\x80"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Of(%q) did not panic", spec)
				}
			}()
			Of(spec)
		}()
	}
}

// FuzzSpan holds Span to ^[class]{min,max}$ for each class buyflow uses.
func FuzzSpan(f *testing.F) {
	res := make([]*regexp.Regexp, len(cases))
	for i, c := range cases {
		res[i] = regexp.MustCompile(fmt.Sprintf(`^[%s]{%d,%d}$`, c.spec, c.min, c.max))
	}
	for _, s := range []string{"", "abc", "0123456789abcdef", "a b", "cp-abcdefghijklmnopqrstuvwxyz", "é", strings.Repeat("x", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, str string) {
		for i, c := range cases {
			if got, want := Of(c.spec).Span(str, c.min, c.max), res[i].MatchString(str); got != want {
				t.Fatalf("[%s]{%d,%d} on %q: Span says %v, the pattern %v", c.spec, c.min, c.max, str, got, want)
			}
		}
	})
}
