package pgserver

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/xdg-go/scram"

	"github.com/sluicelab/sluice/internal/sqlstate"
)

// Method is a client authentication method.
type Method uint8

const (
	// Trust accepts the client without a password.
	Trust Method = iota
	// Cleartext asks for Auth.Password in clear text.
	Cleartext
	// MD5 asks for PostgreSQL's salted MD5 hash of Auth.Password.
	MD5
	// SCRAM runs SCRAM-SHA-256 against Auth.Credentials.
	SCRAM
)

// Auth configures authentication. The zero value trusts every user.
type Auth struct {
	Method Method
	// User, if not "", is the only user name accepted. Under Trust
	// another name is refused with FATAL 28000 `role "x" does not
	// exist`; under the password methods it fails with 28P01 after the
	// exchange, like a wrong password, so names cannot be probed.
	User string
	// Password is every user's password under Cleartext and MD5.
	Password string
	// Credentials are the users and their SCRAM secrets under SCRAM.
	Credentials *Credentials
}

// scramIterations is the PBKDF2 iteration count of derived SCRAM
// credentials (PostgreSQL's default).
const scramIterations = 4096

// Credentials are SCRAM-SHA-256 server credentials by user name, derived
// once, plus decoy credentials an unknown user is run against. It is
// immutable and safe for concurrent use.
type Credentials struct {
	users map[string]scram.StoredCredentials
	decoy scram.StoredCredentials
}

// NewCredentials derives the SCRAM-SHA-256 credentials of every user
// (user name to password) with random salts. It fails for a password
// SASLprep rejects.
func NewCredentials(users map[string]string) (*Credentials, error) {
	c := &Credentials{users: make(map[string]scram.StoredCredentials, len(users))}
	for user, pw := range users {
		sc, err := storedCredentials(user, pw)
		if err != nil {
			return nil, fmt.Errorf("user %s: %w", user, err)
		}
		c.users[user] = sc
	}
	var junk [32]byte
	rand.Read(junk[:])
	decoy, err := storedCredentials("", hex.EncodeToString(junk[:]))
	if err != nil {
		return nil, err
	}
	c.decoy = decoy
	return c, nil
}

func storedCredentials(user, password string) (scram.StoredCredentials, error) {
	client, err := scram.SHA256.NewClient(user, password, "")
	if err != nil {
		return scram.StoredCredentials{}, err
	}
	var salt [16]byte
	rand.Read(salt[:])
	return client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt[:]), Iters: scramIterations})
}

// authenticate runs the configured exchange for user. On failure it has
// sent the FATAL error and returns ErrAuthFailed, or a *ConnError.
func (c *Conn) authenticate(ctx context.Context, a *Auth, user string) error {
	known := a.User == "" || user == a.User
	fail := func() error {
		c.fatal(sqlstate.InvalidPassword, fmt.Sprintf("password authentication failed for user %q", user))
		return ErrAuthFailed
	}
	switch a.Method {
	case Trust:
		if !known {
			c.fatal(sqlstate.InvalidAuthorizationSpecification, fmt.Sprintf("role %q does not exist", user))
			return ErrAuthFailed
		}
		return nil
	case Cleartext, MD5:
		want := a.Password
		if a.Method == MD5 {
			var salt [4]byte
			rand.Read(salt[:])
			want = "md5" + md5Hex(md5Hex(a.Password+user)+string(salt[:]))
			c.Send(&pgproto3.AuthenticationMD5Password{Salt: salt})
			c.be.SetAuthType(pgproto3.AuthTypeMD5Password)
		} else {
			c.Send(&pgproto3.AuthenticationCleartextPassword{})
			c.be.SetAuthType(pgproto3.AuthTypeCleartextPassword)
		}
		pm, err := receiveAuth[*pgproto3.PasswordMessage](ctx, c)
		if err != nil {
			return err
		}
		if subtle.ConstantTimeCompare([]byte(pm.Password), []byte(want)) != 1 || !known {
			return fail()
		}
		return nil
	case SCRAM:
		return c.scram(ctx, a, user, fail)
	}
	c.fatal(sqlstate.InternalError, "unknown authentication method")
	return ErrAuthFailed
}

func (c *Conn) scram(ctx context.Context, a *Auth, user string, fail func() error) error {
	if a.Credentials == nil {
		c.fatal(sqlstate.InternalError, "authentication setup failed")
		return ErrAuthFailed
	}
	creds, known := a.Credentials.users[user]
	if !known {
		creds = a.Credentials.decoy
	}
	known = known && (a.User == "" || user == a.User)
	srv, err := scram.SHA256.NewServer(func(string) (scram.StoredCredentials, error) { return creds, nil })
	if err != nil {
		c.fatal(sqlstate.InternalError, "authentication setup failed")
		return ErrAuthFailed
	}
	conv := srv.NewConversation()
	c.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{"SCRAM-SHA-256"}})
	c.be.SetAuthType(pgproto3.AuthTypeSASL)
	first, err := receiveAuth[*pgproto3.SASLInitialResponse](ctx, c)
	if err != nil {
		return err
	}
	if first.AuthMechanism != "SCRAM-SHA-256" {
		c.fatal(sqlstate.ProtocolViolation, "client selected an invalid SASL authentication mechanism")
		return ErrAuthFailed
	}
	out, err := conv.Step(string(first.Data))
	if err != nil {
		return fail()
	}
	c.Send(&pgproto3.AuthenticationSASLContinue{Data: []byte(out)})
	c.be.SetAuthType(pgproto3.AuthTypeSASLContinue)
	final, err := receiveAuth[*pgproto3.SASLResponse](ctx, c)
	if err != nil {
		return err
	}
	out, err = conv.Step(string(final.Data))
	if err != nil || !conv.Valid() || !known {
		return fail()
	}
	c.Send(&pgproto3.AuthenticationSASLFinal{Data: []byte(out)})
	return nil
}

// receiveAuth flushes what is buffered and reads the client's answer to
// an authentication request, which must be an M.
func receiveAuth[M pgproto3.FrontendMessage](ctx context.Context, c *Conn) (M, error) {
	var zero M
	if err := c.Flush(); err != nil {
		return zero, err
	}
	msg, err := c.Receive(ctx)
	if err != nil {
		return zero, err
	}
	m, ok := msg.(M)
	if !ok {
		c.fatal(sqlstate.ProtocolViolation, fmt.Sprintf("expected an authentication response, got %T", msg))
		return zero, ErrAuthFailed
	}
	return m, nil
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
