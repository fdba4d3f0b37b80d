package httpapi

import (
	"testing"
)

func TestIsJSON(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json": true, "application/json; charset=utf-8": true, "APPLICATION/JSON": true,
		"application/jsonp": false, "application/json-seq": false, "application/json+x": false, "text/json": false,
		"": false, "application/json;": true, "application/json; charset": false,
	} {
		if got := IsJSON(ct); got != want {
			t.Errorf("IsJSON(%q) = %v, want %v", ct, got, want)
		}
	}
}
