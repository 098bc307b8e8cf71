package events

import "strings"

// APITenant returns the tenant of an API request subject
// (recall.api.<verb>.<tenant>.<session>), or false when subject is not one.
func APITenant(subject string) (string, bool) {
	if !strings.HasPrefix(subject, SubjectAPIRoot+".") {
		return "", false
	}
	tenant, _, ok := SplitSessionSubject(subject)
	if !ok || strings.Count(subject, ".") != 4 {
		return "", false
	}
	return tenant, true
}

// ReplyAllowed is the reply-space rule of the API: a reply to a request on
// subject may be published on reply only when reply lies under the inbox
// prefix of subject's tenant (InboxPrefix) and names one subject (no
// wildcard, no empty token, no whitespace). Requesters make their reply
// subjects there; services answer nowhere else.
func ReplyAllowed(subject, reply string) bool {
	tenant, ok := APITenant(subject)
	if !ok {
		return false
	}
	rest, ok := strings.CutPrefix(reply, InboxPrefix(tenant)+".")
	if !ok || rest == "" {
		return false
	}
	for _, tok := range strings.Split(rest, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return false
		}
	}
	return true
}
