package memory

import "testing"

func TestShellFileOps(t *testing.T) {
	for _, tc := range []struct {
		line string
		want string // op:path[<from] …
	}{
		{"mv old.py new.py", "move:new.py<old.py"},
		{"git mv src/a.ts src/lib/", "move:src/lib/a.ts<src/a.ts"},
		{"mv a.txt b.txt dir", "move:dir/a.txt<a.txt move:dir/b.txt<b.txt"},
		{"rm -rf build/out.js && rm -f 'docs/old notes.md'", "delete:build/out.js delete:docs/old notes.md"},
		{"git rm --cached secrets.env", ""},
		{"git rm -q legacy.go", "delete:legacy.go"},
		{"cp -r conf/base.yaml conf/prod.yaml", "write:conf/prod.yaml"},
		{"touch a.txt b.txt", "touch:a.txt touch:b.txt"},
		{`sed -i 's/foo/bar/g' main.go util.go`, "edit:main.go edit:util.go"},
		{`sed -i.bak -e 's/a/b/' x.cfg`, "edit:x.cfg"},
		{`sed 's/a/b/' x.cfg > y.cfg`, "write:y.cfg"},
		{`perl -pi -e 's/a/b/' x.pl`, "edit:x.pl"},
		{"echo hi > out.txt 2>&1", "write:out.txt"},
		{"go test ./... 2>/dev/null | tee -a test.log", "edit:test.log"},
		{"echo done >> CHANGELOG.md", "edit:CHANGELOG.md"},
		{"cd web && mv App.tsx app.tsx", "move:web/app.tsx<web/App.tsx"},
		{"cat > notes/plan.md <<'EOF'\n# plan\nrm -rf / > nowhere\nEOF\ngit add notes/plan.md", "write:notes/plan.md"},
		{"sudo FOO=1 rm /etc/x.conf", "delete:/etc/x.conf"},
		{"git checkout -- api.go", "edit:api.go"},
		{"git restore --staged api.go", ""},
		{"truncate -s 0 app.log", "edit:app.log"},
		{"git apply <<'P'\n--- a/x.go\n+++ b/x.go\n@@\n--- /dev/null\n+++ b/y.go\nP", "edit:x.go write:y.go"},
		{"apply_patch <<'P'\n*** Begin Patch\n*** Add File: n.py\n*** Update File: o.py\n*** Move to: p.py\n*** Delete File: q.py\nP", "write:n.py move:p.py<o.py delete:q.py"},
		{"ls -la; grep -r foo . > /dev/null; go build ./...", ""},
		{`echo "a > b" && printf 'x;y' > "my file.txt"`, "write:my file.txt"},
	} {
		got := ""
		for _, o := range ShellFileOps(tc.line) {
			if got != "" {
				got += " "
			}
			got += o.op + ":" + o.path
			if o.from != "" {
				got += "<" + o.from
			}
		}
		if got != tc.want {
			t.Errorf("ShellFileOps(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}
