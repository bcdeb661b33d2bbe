import HTTP1

/// What the response side does on a route with `scrub` (CONTRACT.md "Programs in a sandbox",
/// "Scrubbing"; docs/ARCHITECTURE.md "Scrubbing"): the exchange's `ResponseScrubber` sees the head
/// as written and every body byte before it is framed for the client. A 101's tunnel is not
/// scrubbed (its bytes never pass here).
extension UpstreamSide {
    /// An answer that cannot be scrubbed: a `Content-Encoding` other than `identity` (the proxy asked
    /// for identity). Nothing of it reaches the client: 502 `bad_gateway`. A 101 is let through.
    func refusesUnscrubbable(_ head: ResponseHead) -> String? {
        head.status == 101 ? nil : ResponseScrubber.refusal(head)
    }

    /// Body bytes through the scrubber: what may go now is framed for the client, the rest waits
    /// for the next read or the body's end (`finishScrubbedBody`).
    func writeScrubbed(_ exchange: Exchange, _ bytes: UnsafeRawBufferPointer, _ scrubber: ResponseScrubber, _ connection: Connection) {
        noteScrubbed(scrubber.scrub(bytes) { writeFramed(exchange, $0, connection) }, exchange)
    }

    /// The body's end: the bytes the scrubber held back go, before the last chunk.
    func finishScrubbedBody(_ exchange: Exchange, _ connection: Connection) {
        guard let scrubber = exchange.scrubber else { return }
        noteScrubbed(scrubber.finish { writeFramed(exchange, $0, connection) }, exchange)
    }

    /// `n` values replaced: `tokenproxy_scrubbed_total{route}` and the exchange's record.
    func noteScrubbed(_ n: Int, _ exchange: Exchange) {
        guard n > 0 else { return }
        ctx.metrics.counters.routes[exchange.metricsSlot].scrubbed += n
        exchange.record.scrubbed(n)
    }
}
