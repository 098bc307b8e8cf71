package events

// Trail is the exact record of what a session's tool calls did, kept by
// the extractor beside the notes (MemoryRecord.Trail) and rendered into
// every served summary whatever the notes say (memory.FoldTrail,
// memory.RenderTrail). It is computed from tool calls and their results
// alone, never from a model's words.
type Trail struct {
	// Seq is the newest transcript sequence folded into the trail: a
	// record at or below it is never folded twice.
	Seq uint64 `json:"seq"`
	// Files changed, oldest change first (the newest last). At most
	// memory.TrailMaxFiles are kept; DroppedFiles counts the others.
	Files        []TrailFile `json:"files,omitempty"`
	DroppedFiles int         `json:"dropped_files,omitempty"`
	// Commands are the newest shell commands with their outcomes (at most
	// memory.TrailMaxCommands); TotalCommands counts every one folded.
	Commands      []TrailCommand `json:"commands,omitempty"`
	TotalCommands int            `json:"total_commands,omitempty"`
	// Errors are the newest failed tool calls with what fixed them (at
	// most memory.TrailMaxErrors); TotalErrors counts every one folded.
	Errors      []TrailError `json:"errors,omitempty"`
	TotalErrors int          `json:"total_errors,omitempty"`
}

// TrailFile is one file a session changed.
type TrailFile struct {
	// Path is the file's path as the agent last wrote it.
	Path string `json:"path"`
	// Created: the session created the file (a Write to a new path, a
	// touch, cp or redirect to a path not seen before); Deleted: its last
	// change removed it; From: the path it had before it was moved.
	Created bool   `json:"created,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
	From    string `json:"from,omitempty"`
	// Changes counts the tool calls and commands that changed it.
	Changes int `json:"changes"`
	// Last is the last change in a phrase; Record and Seq name the
	// transcript record it happened in.
	Last   string `json:"last"`
	Record string `json:"record,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
}

// TrailCommand is a shell command and how it ended.
type TrailCommand struct {
	Command string `json:"command"`
	// Outcome is "ok", or "failed" with the first line that says why.
	Outcome string `json:"outcome"`
	Seq     uint64 `json:"seq,omitempty"`
}

// TrailError is a failed tool call and the change that followed it.
type TrailError struct {
	// Call names the tool call (a command, a tool and its path); Error
	// is the first line of its result that says what failed.
	Call  string `json:"call"`
	Error string `json:"error"`
	// Fix is the first file change after the failure ("" while none);
	// Passed: the same call succeeded later.
	Fix    string `json:"fix,omitempty"`
	Passed bool   `json:"passed,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
}
