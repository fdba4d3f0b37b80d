// Package charclass checks that a string is a run of one ASCII character class with a length in
// a range, what ^[class]{min,max}$ says, without regexp. A counted repetition compiles to one
// instruction per repeat: ^[A-Za-z0-9_.:-]{16,255}$ costs 3,184 allocations, 224 KB and 0.2 ms
// on a warm machine, and several times that on a cold start, paid by the start or by a
// function's first request. A Set costs nothing to build.
package charclass

// Set is a set of ASCII bytes.
type Set [2]uint64

// Of returns the set of the bytes spec lists, as a regexp class does: "A-Za-z0-9_.:-", where
// x-y is a range and a '-' first or last is itself. It panics on a byte outside ASCII or a range
// backwards, as regexp.MustCompile would: a spec is a constant.
func Of(spec string) Set {
	var s Set
	for i := 0; i < len(spec); i++ {
		lo, hi := spec[i], spec[i]
		if i+2 < len(spec) && spec[i+1] == '-' {
			hi = spec[i+2]
			i += 2
		}
		if lo > hi || hi >= 0x80 {
			panic("charclass: bad spec " + spec)
		}
		for c := lo; ; c++ {
			s[c/64] |= 1 << (c % 64)
			if c == hi {
				break
			}
		}
	}
	return s
}

// Has reports whether c is in s.
func (s Set) Has(c byte) bool { return c < 0x80 && s[c/64]&(1<<(c%64)) != 0 }

// Span reports whether str has minLen to maxLen bytes, each in s.
func (s Set) Span(str string, minLen, maxLen int) bool {
	if len(str) < minLen || len(str) > maxLen {
		return false
	}
	for i := range len(str) {
		if !s.Has(str[i]) {
			return false
		}
	}
	return true
}
