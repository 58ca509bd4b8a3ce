package protocol

import "time"

// Version is the version of the contract this package implements: the one the title
// of PROTOCOL.md names. Each version keeps every rule of the one before, so it is not
// negotiated on the wire; a test pins it to PROTOCOL.md.
const Version = 3

// Subprotocol is the WebSocket subprotocol (RFC 6455 §1.9) of this contract. A client
// asks for it in Sec-WebSocket-Protocol and the hub accepts no other. PROTOCOL.md §4
// fixes it for every version of the contract: its suffix, SubprotocolVersion, is the
// version of the frames' wire format, not Version.
const Subprotocol = "lockhub.v1"

// SubprotocolVersion is the suffix of Subprotocol.
const SubprotocolVersion = 1

// Limits of PROTOCOL.md §4.
const (
	// MaxFrameSize caps a client frame. A larger frame closes the connection with
	// 1009 (websocket.StatusMessageTooBig); DecodeRequest refuses it with
	// ErrFrameTooLarge before parsing it. Server frames are not capped: a snapshot
	// grows with its locks.
	MaxFrameSize = 64 << 10

	// MaxPreAuthFrameSize caps a frame before authentication (version 2): a larger
	// one closes with 1009 too. An auth frame with a token fits well within it.
	MaxPreAuthFrameSize = 16 << 10

	// MaxIDLength caps a request id, in characters (Unicode code points).
	MaxIDLength = 64

	// AuthTimeout is how long a new connection has to send its first auth frame
	// before it is closed with CloseAuthTimeout.
	AuthTimeout = 10 * time.Second

	// RateLimit is the frames a second served per connection, and RateBurst the
	// burst above it; each request beyond them is answered with CodeRateLimited.
	RateLimit = 50
	RateBurst = 100

	// RateLimitGrace is how long a connection may stay over the rate after its first
	// rate_limited answer before it is closed with CloseTooMany.
	RateLimitGrace = 10 * time.Second

	// LimitLogEvery is how often a limit that keeps being hit is logged (version 3, §4
	// "Fair share"): at most once per limit in this long, with the hits since.
	LimitLogEvery = 10 * time.Second

	// TokenLeeway is the clock skew allowed when checking a token's expiry.
	TokenLeeway = 5 * time.Second

	// PongTimeout is how long the hub waits for the Pong answering its WebSocket Ping
	// (RFC 6455 §5.5.2) before it closes the socket (version 2, "Heartbeat").
	PongTimeout = 10 * time.Second

	// MaxViewsPerSocket caps the entities one socket views at a time (version 2,
	// §9); a view beyond it answers CodeTooManyViews.
	MaxViewsPerSocket = 50

	// NudgeEvery is how often one person may nudge the holder of one entity (§9);
	// sooner answers CodeRateLimited.
	NudgeEvery = 30 * time.Second
)
