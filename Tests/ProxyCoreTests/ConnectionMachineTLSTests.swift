import HTTP1
import Testing

@testable import ProxyCore

private let limits = ConnectionMachine.Timeouts(clientHeaderTimeout: 10, clientIdleTimeout: 60, clientSendTimeout: 30)
private let exchangeLimits = ExchangeMachine.Timeouts(upstreamTimeout: 60, upstreamIdleTimeout: 30, clientIdleTimeout: 60)
private let pin = TunnelPin(host: "api.example", port: 443)

/// The machine of a CONNECT's exchange, as `Connection.connect` makes it: the tunnel outlives the
/// exchange whatever the request's HTTP version said.
private func connectExchange() -> ExchangeMachine {
    var parser = RequestParser(limits: ParserLimits(maxHeaderBytes: 8192, maxBodyBytes: 0))
    let bytes = Array("CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n\r\n".utf8)
    let (_, event) = bytes.withUnsafeBytes { parser.parse($0) }
    guard case .head(var parsed)? = event else { fatalError("not a request head") }
    parsed.keepAlive = true
    return ExchangeMachine(head: parsed, draining: false)
}

/// A plain connection whose CONNECT has been answered 200 (queued) and whose exchange is over, as
/// `Connection.connect` leaves it.
private func answeredConnect(noMoreRequests: Bool = false) -> (ConnectionMachine, ConnectionMachine.AfterExchange) {
    var m = ConnectionMachine(now: 0)
    m.onClientBytes(now: 1)
    m.onRequestHead(connectExchange())
    m.onConnectAnswered(pin)
    m.exchange.onProxyAnswer(closesConnection: false)
    let over = m.onResponseDone(noMoreRequests: noMoreRequests)
    #expect(over, "a CONNECT has no body: its exchange ends with its answer")
    let after = m.onExchangeFinished(now: 2, noMoreRequests: noMoreRequests)
    return (m, after)
}

/// The TLS under a client connection, as `Connection` drives it: a TLS listener's handshake, and a
/// forward-proxy CONNECT whose 200 switches the connection into TLS (docs/FORWARD-PROXY.md).
@Suite struct ConnectionMachineTLSTests {
    @Test func aTLSListenersConnectionHandshakesBeforeItReadsAnyRequest() {
        var m = ConnectionMachine(now: 0, tls: true)
        #expect(m.phase == .handshaking && m.isHandshaking && m.speaksTLS)
        #expect(!m.parsesRequests && !m.readsRequests, "the handshake's own steps drive the socket")
        #expect(!m.tlsEstablished, "no close_notify before the handshake is done")
        m.onHandshakeDone()
        #expect(m.phase == .idle && m.parsesRequests && m.readsRequests)
        #expect(m.speaksTLS && m.tlsEstablished && m.pin == nil)
    }

    @Test func aPlainConnectionNeitherHandshakesNorSpeaksTLS() {
        var m = ConnectionMachine(now: 0)
        #expect(m.phase == .idle && !m.speaksTLS && !m.tlsEstablished && !m.awaitsTunnel)
        m.onHandshakeDone()
        #expect(m.phase == .idle, "a stray handshake event changes nothing")
    }

    @Test func theHandshakeCountsAgainstTheIdleTimeoutFromTheAccept() {
        let m = ConnectionMachine(now: 0, tls: true)
        #expect(m.onTick(now: 59, pendingOut: 0, .init(), limits, exchangeLimits) == .none)
        #expect(m.onTick(now: 61, pendingOut: 0, .init(), limits, exchangeLimits) == .close)
    }

    @Test func aDrainClosesAConnectionStillInItsHandshake() {
        var m = ConnectionMachine(now: 0, tls: true)
        let closes = m.onDrain(parserIdle: true, unparsedInput: false)
        #expect(closes)
    }

    @Test func plainHTTPOnATLSListenerIsAnsweredPlainlyButNeverInsideATunnel() {
        let listener = ConnectionMachine(now: 0, tls: true)
        #expect(listener.onHandshakeFailed(notTLS: true) == .answerPlainlyThenClose)
        #expect(listener.onHandshakeFailed(notTLS: false) == .close, "a failed TLS handshake gets no HTTP answer")
        var (tunnel, _) = answeredConnect()
        let written = tunnel.onOutputWritten(now: 3)
        #expect(written == .startTunnelTLS)
        #expect(tunnel.onHandshakeFailed(notTLS: true) == .close, "the client asked for TLS itself")
    }

    @Test func anAnsweredConnectSwitchesIntoTLSOnceItsAnswerIsWritten() {
        var (m, after) = answeredConnect()
        #expect(after == .awaitTunnelTLS)
        #expect(m.phase == .connectAnswered && m.awaitsTunnel && !m.speaksTLS)
        #expect(!m.parsesRequests && !m.readsRequests, "the client's next bytes are TLS for the tunnel")
        #expect(m.pin == pin)
        let written = m.onOutputWritten(now: 3)
        #expect(written == .startTunnelTLS)
        #expect(m.phase == .handshaking && m.speaksTLS && !m.awaitsTunnel && !m.tlsEstablished)
        m.onHandshakeDone()
        #expect(m.phase == .idle && m.parsesRequests && m.tlsEstablished && m.pin == pin)
    }

    @Test func theClientIsNotReadWhileTheConnectsExchangeEnds() {
        var m = ConnectionMachine(now: 0)
        m.onRequestHead(connectExchange())
        m.onConnectAnswered(pin)
        #expect(m.awaitsTunnel && !m.speaksTLS)
        let written = m.onOutputWritten(now: 1)
        #expect(written == .none, "TLS waits for the exchange's end too")
        #expect(m.phase == .exchange)
    }

    @Test func bytesSentBeforeTheConnectsAnswerCloseTheConnection() {
        var (m, _) = answeredConnect()
        let written = m.onOutputWritten(now: 3, unparsedInput: true)
        #expect(written == .close)
        #expect(!m.speaksTLS)
    }

    @Test func aClientThatHalfClosedBeforeTheTunnelIsClosedAfterThe200() {
        let (m, after) = answeredConnect(noMoreRequests: true)
        #expect(after == .closeAfterWrite)
        #expect(m.phase == .closingAfterWrite)
    }

    @Test func aClientThatHalfClosesWhileTheTunnelWaitsIsClosed() {
        var (m, _) = answeredConnect()
        let closed = m.onClientFinishedSending(pendingOut: 0)
        #expect(closed == .close)
        var (writing, _) = answeredConnect()
        let waits = writing.onClientFinishedSending(pendingOut: 39)
        #expect(waits == .none)
        let afterThe200 = writing.onOutputWritten(now: 3)
        #expect(afterThe200 == .close, "the 200 goes, then the connection closes")
    }

    @Test func theWaitForTheTunnelsHandshakeCountsFromTheConnectsEnd() {
        let (m, _) = answeredConnect()
        #expect(m.onTick(now: 61, pendingOut: 0, .init(), limits, exchangeLimits) == .none)
        #expect(m.onTick(now: 63, pendingOut: 0, .init(), limits, exchangeLimits) == .close)
        #expect(m.onTick(now: 40, pendingOut: 39, .init(), limits, exchangeLimits) == .sendTimedOut)
    }

    @Test func aTLSReadThatMustWriteWaitsForAWritableSocket() {
        var m = ConnectionMachine(now: 0, tls: true)
        m.onHandshakeDone()
        #expect(!m.tlsWantsWrite)
        m.onTLSWantsWrite()
        #expect(m.tlsWantsWrite)
        m.onTLSCanWrite()
        #expect(!m.tlsWantsWrite)
    }
}
