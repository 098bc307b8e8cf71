package tenantcfg

import (
	"bytes"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/tenant-config.schema.json")

const schemaPath = "../../docs/tenant-config.schema.json"

// TestSchemaGolden: the published schema is Schema()'s output (refresh
// with go test ./internal/tenantcfg -run TestSchemaGolden -update), and
// every field is described in the schema and in docs/tenant-config.md.
func TestSchemaGolden(t *testing.T) {
	if u := undocumented(); len(u) > 0 {
		t.Fatalf("fields without a description in fieldDocs: %v", u)
	}
	got := Schema()
	if *update {
		if err := os.WriteFile(schemaPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date: run go test ./internal/tenantcfg -run TestSchemaGolden -update", schemaPath)
	}
	doc, err := os.ReadFile("../../docs/tenant-config.md")
	if err != nil {
		t.Fatal(err)
	}
	for key := range fieldDocs {
		name := key[strings.IndexByte(key, '.')+1:]
		if !regexp.MustCompile("`[a-z_.\\[\\]]*" + regexp.QuoteMeta(name) + "`").Match(doc) {
			t.Errorf("docs/tenant-config.md does not mention %s", key)
		}
	}
}

// TestSchemaIsValidJSON: the empty configuration is valid, and the schema
// refuses unknown fields as Parse does.
func TestSchemaIsValidJSON(t *testing.T) {
	if _, err := Parse([]byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(Schema(), []byte(`"additionalProperties": false`)) {
		t.Fatal("the schema does not refuse unknown fields")
	}
}
