package upgrade

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// Subset reports whether every member of want is in got with the same
// value (objects recursively; arrays element by element, of the same
// length), and where they differ: answers may gain fields from one release
// to the next, never lose or change one. path names the root ("$").
func Subset(want, got any, path string) (string, bool) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path, false
		}
		for k, v := range w {
			if p, ok := Subset(v, g[k], path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path, false
		}
		for i := range w {
			if p, ok := Subset(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	default:
		return path, reflect.DeepEqual(want, got)
	}
}

// SubsetJSON is Subset of two JSON texts; a text that does not parse
// differs at "$".
func SubsetJSON(want, got json.RawMessage) (string, bool) {
	var w, g any
	if json.Unmarshal(want, &w) != nil || json.Unmarshal(got, &g) != nil {
		return "$", false
	}
	return Subset(w, g, "$")
}
