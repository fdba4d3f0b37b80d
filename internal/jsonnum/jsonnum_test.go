package jsonnum

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		doc     string
		pointer string // "" with ok: accepted
		ok      bool
	}{
		{doc: `{"budget":15000,"bid":0.5,"n":[1,2e3,-4.5E-2],"s":"1e10000000"}`, ok: true},
		{doc: `1234567890123456789012345678901.5`, pointer: ""},
		{doc: `123456789012345678901234567890.5`, ok: true},
		{doc: `{"media_buy":{"packages":[{"budget":1},{"budget":1e10000000}]}}`, pointer: "/media_buy/packages/1/budget"},
		{doc: `{"a":{"b":[[0,-1e-10000000]]}}`, pointer: "/a/b/0/1"},
		{doc: `{"x":2E9999999}`, pointer: "/x"},
		{doc: `{"a/b":{"c~d":1e101}}`, pointer: "/a~1b/c~0d"},
		{doc: `{"k":"v","n":` + strings.Repeat("1", 41) + `}`, pointer: "/n"},
		{doc: `{"n":1e30}`, pointer: "/n"},
		{doc: `{"n":1e29,"m":9.99e-100,"z":0e-100}`, ok: true},
		{doc: `{"n":0.` + strings.Repeat("0", 70) + `1}`, pointer: "/n"}, // over MaxLiteral
		{doc: `[{"a":1},{"b":[1,{"c":1e200}]}]`, pointer: "/1/b/1/c"},
		{doc: `{"e":{},"f":[],"g":{"h":null,"i":true},"j":1e-101}`, pointer: "/j"},
	}
	for _, tt := range tests {
		err := Check([]byte(tt.doc))
		if tt.ok {
			if err != nil {
				t.Errorf("Check(%s) = %v, want accepted", tt.doc, err)
			}
			continue
		}
		var ne *Error
		if !errors.As(err, &ne) {
			t.Errorf("Check(%.60s) = %v, want *Error", tt.doc, err)
			continue
		}
		if ne.Pointer != tt.pointer || ne.Error() == "" {
			t.Errorf("Check(%.60s): pointer %q (%v), want %q", tt.doc, ne.Pointer, ne, tt.pointer)
		}
	}
	var syn *json.SyntaxError
	if err := Check([]byte(`{"a":`)); err == nil || errors.As(err, new(*Error)) {
		t.Errorf("truncated document: %v", err)
	}
	if err := Check([]byte(`{"a":01}`)); !errors.As(err, &syn) {
		t.Errorf("invalid number: %v", err)
	}
}

func TestCheckUnique(t *testing.T) {
	for doc, pointer := range map[string]string{
		`{"packages":[{"budget":1,"product_id":"p","budget":30000}]}`: "/packages/0/budget",
		`{"a":1,"b":{"a":2},"a":3}`:                                   "/a",
		`[{"x":1},{"x":2,"y":{"x":3,"x":4}}]`:                         "/1/y/x",
	} {
		var de *DuplicateKeyError
		if err := CheckUnique([]byte(doc)); !errors.As(err, &de) || de.Pointer != pointer {
			t.Errorf("CheckUnique(%s) = %v, want a duplicate at %s", doc, err, pointer)
		}
		if err := Check([]byte(doc)); err != nil {
			t.Errorf("Check(%s) = %v: only CheckUnique judges keys", doc, err)
		}
	}
	if err := CheckUnique([]byte(`{"a":{"k":1},"b":{"k":2},"c":[{"k":3},{"k":4}]}`)); err != nil {
		t.Errorf("the same key in different objects: %v", err)
	}
}

func TestSplit(t *testing.T) {
	for lit, want := range map[string]Decimal{
		"15000":   {Digits: "15000"},
		"5000.5":  {Digits: "50005", Exp: -1},
		"-1.5e3":  {Digits: "15", Exp: 2, Negative: true},
		"2E-0002": {Digits: "2", Exp: -2},
		"0":       {Digits: "0"},
	} {
		got, err := Split(lit)
		if err != nil || got != want {
			t.Errorf("Split(%q) = %+v, %v; want %+v", lit, got, err, want)
		}
	}
	for _, lit := range []string{"", "-", "01", "1.", ".1", "+1", "1e", "1e+", "0x1", "1e1000", "1e0101", "Infinity", "1 "} {
		if d, err := Split(lit); err == nil {
			t.Errorf("Split(%q) = %+v, want refused", lit, d)
		}
	}
}

// numberSchema is a schema that makes jsonschema compare every number it meets with big.Rat:
// the code path that panics on 1e10000000.
const numberSchema = `{"$defs":{"v":{"anyOf":[{"type":"number","minimum":0,"maximum":1e20,"multipleOf":0.01},
 {"type":"array","items":{"$ref":"#/$defs/v"},"uniqueItems":true},
 {"type":"object","additionalProperties":{"$ref":"#/$defs/v"}},{"type":["string","boolean","null","number"]}]}},
 "$ref":"#/$defs/v"}`

func compiled(t testing.TB) *jsonschema.Schema {
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(numberSchema))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("numbers.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("numbers.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTheSchemaLibraryPanicsWithoutCheck pins the upstream defect this package guards against:
// when it is fixed upstream, this test fails and says so.
func TestTheSchemaLibraryPanicsWithoutCheck(t *testing.T) {
	s := compiled(t)
	for _, lit := range []string{"1e10000000", "-1e-10000000", "2E9999999"} {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(lit))
		if err != nil {
			t.Fatal(err)
		}
		panicked := func() (p bool) {
			defer func() { p = recover() != nil }()
			_ = s.Validate(inst)
			return false
		}()
		if !panicked {
			t.Errorf("jsonschema no longer panics on %s: the upstream bug is fixed; the bound in Check stays, this pin can go", lit)
		}
		if err := Check([]byte(lit)); err == nil {
			t.Errorf("Check let %s through", lit)
		}
	}
}

// FuzzCheck checks that Check never panics; that a document it accepts never panics the
// schema library (the defect it exists for) and holds only numbers within the bounds; and that
// a refusal names a number that is really at that pointer.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"media_buy":{"packages":[{"budget":1e10000000}]}}`, `[-1e-10000000]`, `{"a":2E9999999}`,
		`{"budget":15000,"bid":0.5,"n":[1,2e3]}`, `{"a/b":{"c~d":1e101}}`, `1e29`, `[[[1e30]]]`,
	} {
		f.Add([]byte(s))
	}
	s := compiled(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		err := Check(doc)
		var ne *Error
		if errors.As(err, &ne) {
			if !json.Valid(doc) {
				return // refused at a number before the decoder reached the syntax error
			}
			v, ok := at(t, doc, ne.Pointer)
			if !ok {
				t.Fatalf("refusal at %q, which is not a number in %q", ne.Pointer, doc)
			}
			if !strings.HasPrefix(v.String(), ne.Literal) {
				t.Fatalf("refusal at %q names %q, the document has %q", ne.Pointer, ne.Literal, v)
			}
			return
		}
		if err != nil || !json.Valid(doc) {
			return
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
		if err != nil {
			return
		}
		_ = s.Validate(inst) // must not panic
	})
}

// at returns the number at JSON pointer p in doc.
func at(t *testing.T, doc []byte, p string) (json.Number, bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", false
	}
	if p != "" {
		for _, tok := range strings.Split(p[1:], "/") {
			tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
			switch c := v.(type) {
			case map[string]any:
				v = c[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(c) {
					return "", false
				}
				v = c[i]
			default:
				return "", false
			}
		}
	}
	n, ok := v.(json.Number)
	return n, ok
}

// BenchmarkCheckUnique measures the walk the submit adds before anything else reads the
// body: a typical buy, and one of 256 KiB (the submit's limit) made of packages.
func BenchmarkCheckUnique(b *testing.B) {
	pkg := `{"product_id":"ctv-premium-us","pricing_option_id":"cpm-fixed-usd","budget":15000.5,"bid_price":12.5,"context":{"n":[1,2,3]}}`
	for _, size := range []int{1, 1800} {
		doc := []byte(`{"seller_id":"s","currency":"USD","media_buy":{"packages":[` + strings.TrimSuffix(strings.Repeat(pkg+",", size), ",") + `]}}`)
		b.Run(strconv.Itoa(len(doc))+"B", func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if err := CheckUnique(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
