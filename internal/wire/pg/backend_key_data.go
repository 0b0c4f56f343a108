package pg

import (
	"github.com/jackc/pgx/v5/pgproto3"
)

// BackendKeyData ('K'): the key a client needs to cancel this session's
// statements.
//
//	BackendKeyData: 'K' int32 len, int32 pid, byte[n] secret
//
// The secret is 4 bytes in protocol 3.0 and up to 256 in 3.2. sluice
// passes the message through unchanged, so the client's key is the
// upstream's; the observer registers the key (pid and secret, as sent)
// for Registry.ByCancelKey and installs a Canceler that sends it upstream.

// maxSecret is the longest secret key protocol 3.2 allows, bytes.
const maxSecret = 256

// onBackendKeyData registers the session's cancel key.
func (s *serverObserver) onBackendKeyData() {
	if s.fr.truncated() || s.onKey == nil {
		return
	}
	var k pgproto3.BackendKeyData
	if k.Decode(s.fr.buf) != nil {
		return
	}
	s.onKey(s.fr.buf)
}
