package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// EditToolName is the only tool the extraction fork may use.
const EditToolName = "Edit"

// EditToolSchema is the JSON Schema of the Edit tool input.
const EditToolSchema = `{"type":"object","properties":{` +
	`"file_path":{"type":"string","description":"Path of the notes file; must be the path given in the prompt"},` +
	`"old_string":{"type":"string","description":"Exact text to replace; must occur exactly once in the file"},` +
	`"new_string":{"type":"string","description":"Replacement text; must differ from old_string"}},` +
	`"required":["file_path","old_string","new_string"],"additionalProperties":false}`

// EditToolDescription describes the Edit tool to the model.
const EditToolDescription = "Replace one exact, unique occurrence of old_string by new_string in the session notes file. " +
	"Headers (# lines) and the italic description lines below them must stay unchanged."

// Errors of edit application. Every error of ApplyEdit and ApplyToolCall
// wraps one of them.
var (
	// ErrInvalidEdit: the edit itself is unusable (empty old_string,
	// old_string equal to new_string, malformed input).
	ErrInvalidEdit = errors.New("invalid edit")
	// ErrMalformedInput: the tool input is not a JSON object with string
	// file_path, old_string and new_string. It wraps ErrInvalidEdit too.
	ErrMalformedInput = fmt.Errorf("%w: malformed tool input", ErrInvalidEdit)
	// ErrNotFound: old_string does not occur in the document.
	ErrNotFound = errors.New("old_string not found")
	// ErrAmbiguous: old_string occurs more than once.
	ErrAmbiguous = errors.New("old_string is not unique")
	// ErrStructure: the edit would change or remove a header or an italic
	// description line, or add a section.
	ErrStructure = errors.New("edit changes the document structure")
	// ErrToolDenied: a tool other than Edit, or Edit on another path.
	ErrToolDenied = errors.New("tool denied")
)

// Edit is one replacement.
type Edit struct {
	OldString string
	NewString string
}

// EditInput is the Edit tool's input.
type EditInput struct {
	FilePath  string `json:"file_path"`
	OldString string `json:"old_string"`
	NewString string `json:"new_string"`
}

// DeniedError is returned for a tool call that is not an Edit of the notes
// path. Its message is exactly "only Edit on <path> is allowed"; it matches
// ErrToolDenied with errors.Is.
type DeniedError struct{ Path string }

func (e *DeniedError) Error() string { return DenyMessage(e.Path) }

// Is reports whether target is ErrToolDenied.
func (e *DeniedError) Is(target error) bool { return target == ErrToolDenied }

// DenyMessage is the text a denied tool call gets back.
func DenyMessage(notesPath string) string {
	return "only " + EditToolName + " on " + notesPath + " is allowed"
}

// ApplyEdit applies e to doc like a file Edit tool: OldString must occur in
// doc exactly once and is replaced by NewString. The result must keep doc's
// structure (CheckStructure). On error doc is to be kept unchanged; the
// returned string is then "".
func ApplyEdit(doc string, e Edit) (string, error) {
	if e.OldString == "" {
		return "", fmt.Errorf("%w: old_string must not be empty", ErrInvalidEdit)
	}
	if e.OldString == e.NewString {
		return "", fmt.Errorf("%w: old_string and new_string are identical", ErrInvalidEdit)
	}
	switch n := strings.Count(doc, e.OldString); {
	case n == 0:
		return "", fmt.Errorf("%w: the text to replace does not occur in the file (it must match exactly, whitespace included)", ErrNotFound)
	case n > 1:
		return "", fmt.Errorf("%w: the text to replace occurs %d times; include more surrounding text to make it unique", ErrAmbiguous, n)
	}
	out := strings.Replace(doc, e.OldString, e.NewString, 1)
	if err := CheckStructure(doc, out); err != nil {
		return "", err
	}
	return out, nil
}

// CheckStructure reports, as an error wrapping ErrStructure, whether after
// differs from before in its sections: the same "# " headers with the same
// italic description lines, in the same order.
func CheckStructure(before, after string) error {
	_, b := Parse(before)
	_, a := Parse(after)
	for i := range b {
		if i >= len(a) {
			return fmt.Errorf("%w: section %q would be removed", ErrStructure, b[i].Header)
		}
		if a[i].Header != b[i].Header {
			return fmt.Errorf("%w: header %q would change to %q; headers are fixed", ErrStructure, b[i].Header, a[i].Header)
		}
		if a[i].Description != b[i].Description {
			return fmt.Errorf("%w: the italic description of %q would change; descriptions are fixed, edit only below them", ErrStructure, b[i].Header)
		}
	}
	if len(a) > len(b) {
		return fmt.Errorf("%w: section %q would be added; new sections are not allowed", ErrStructure, a[len(b)].Header)
	}
	return nil
}

// ParseEditInput decodes an Edit tool input strictly: a JSON object whose
// file_path, old_string and new_string are strings (unknown fields are
// ignored). Errors wrap ErrMalformedInput.
func ParseEditInput(raw []byte) (EditInput, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimSpace(raw), &fields); err != nil || fields == nil {
		return EditInput{}, fmt.Errorf("%w: input must be a JSON object with file_path, old_string and new_string", ErrMalformedInput)
	}
	var in EditInput
	for name, dst := range map[string]*string{"file_path": &in.FilePath, "old_string": &in.OldString, "new_string": &in.NewString} {
		v, ok := fields[name]
		if !ok {
			return EditInput{}, fmt.Errorf("%w: %s is missing", ErrMalformedInput, name)
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return EditInput{}, fmt.Errorf("%w: %s must be a string", ErrMalformedInput, name)
		}
	}
	return in, nil
}

// GuardTool allows only the Edit tool on notesPath. Anything else gets a
// *DeniedError.
func GuardTool(name, filePath, notesPath string) error {
	if name != EditToolName || filePath != notesPath {
		return &DeniedError{Path: notesPath}
	}
	return nil
}

// ApplyToolCall runs one tool call of the fork against doc: the guard first
// (a tool other than Edit is denied whatever its input; an Edit whose input
// names another path too), then input decoding, then ApplyEdit. It returns
// the new document and the text to give the model as the tool result; on
// error the document is unchanged (doc is returned) and the error's message
// is the tool result text.
func ApplyToolCall(doc, notesPath, name string, input []byte) (string, string, error) {
	if name != EditToolName {
		err := &DeniedError{Path: notesPath}
		return doc, err.Error(), err
	}
	in, err := ParseEditInput(input)
	if err != nil {
		// A path we can read but that is wrong is a denial, not malformed.
		var probe struct {
			FilePath string `json:"file_path"`
		}
		if json.Unmarshal(input, &probe) == nil && probe.FilePath != "" && probe.FilePath != notesPath {
			d := &DeniedError{Path: notesPath}
			return doc, d.Error(), d
		}
		return doc, err.Error(), err
	}
	if err := GuardTool(name, in.FilePath, notesPath); err != nil {
		return doc, err.Error(), err
	}
	out, err := ApplyEdit(doc, Edit{OldString: in.OldString, NewString: in.NewString})
	if err != nil {
		return doc, err.Error(), err
	}
	return out, "The file " + notesPath + " has been updated successfully.", nil
}
