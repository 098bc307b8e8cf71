package ingestsvc

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCheckJSON(t *testing.T) {
	many := func(dup bool) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range 100 {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		if dup {
			b.WriteString(`"k42":0,`)
		}
		b.WriteString(`"last":[]}`)
		return b.String()
	}
	for _, c := range []struct {
		in   string
		want error
		msg  string
	}{
		{`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`, nil, ""},
		{`{"a":1,"a":2}`, errDuplicateMember, `duplicate member name "a" in $`},
		{`{"a":1,"\u0061":2}`, errDuplicateMember, `duplicate member name "a" in $`},
		{`{"d":{"x":[1,{"y":1,"y":2}]}}`, errDuplicateMember, `duplicate member name "y" in $.d.x[1]`},
		{`{"s":"a\"b","s\"":1,"s":2}`, errDuplicateMember, `duplicate member name "s" in $`},
		{many(false), nil, ""},
		{many(true), errDuplicateMember, `duplicate member name "k42" in $`},
		{strings.Repeat("[", 5) + strings.Repeat("]", 5), nil, ""},
		{strings.Repeat("[", 6) + strings.Repeat("]", 6), errTooDeep, ""},
		{strings.Repeat("[", 1<<20), errTooDeep, ""},
		{`{"a":1} x`, errJSONSyntax, ""},
		{`{"a" 1}`, errJSONSyntax, ""},
		{`{"a":1`, errJSONSyntax, ""},
		{`  {} `, nil, ""},
	} {
		err := checkJSON([]byte(c.in), 5)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%.40s: %v, want %v", c.in, err, c.want)
			continue
		}
		if c.msg != "" && err.Error() != c.msg {
			t.Errorf("%.40s: %q, want %q", c.in, err, c.msg)
		}
	}
}
