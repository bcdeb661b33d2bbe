import Config
import Credentials
import HTTP1

/// A route's credential as configured (CONTRACT.md "Where the credential goes"): where the token
/// goes, whether a token may be DPoP-bound, and what becomes of a client's own credential. One value,
/// built once per route and loop (`LoopRoute`) and handed to both `AccessPolicy` and `Forwarder`, so
/// the check that refuses a client's credential and the writer that replaces it read the same
/// placement (with `inject` and `type: aws` both set, the signature's Authorization for both).
struct RouteCredential {
    let placement: CredentialPlacement
    /// `credentials.dpop` is set: only then can a token carry a DPoP binding (RFC 9449).
    let dpopEnabled: Bool
    let clientAuthorization: ForwardConfiguration.ClientAuthorization
    /// `inject.query`: an upstream 403 refuses the token too (`ExchangeRules.refusesToken`).
    let tokenInQuery: Bool

    init(_ route: RouteConfiguration) {
        placement = CredentialPlacement(route.inject, credentials: route.credentials)
        dpopEnabled = route.credentials.source.oauth2Client?.dpop != nil
        // A placeholder stands where the credential goes and is always replaced (CONTRACT.md
        // "Programs in a sandbox"): `client_authorization` does not apply to that field.
        clientAuthorization = route.placeholder == nil ? route.forward.clientAuthorization : .replace
        if case .query = placement { tokenInQuery = true } else { tokenInQuery = false }
    }

    /// The route's SigV4 step (`type: aws`), nil for every other type.
    var signer: SigV4RequestSigner? {
        if case .signed(let signer) = placement { return signer }
        return nil
    }

    /// `client_authorization: keep` and the client sent the field (or query parameter) the token
    /// would go in: its own credential goes upstream instead of the token.
    func keepsClientAuthorization(_ head: borrowing RequestHead, query: String?) -> Bool {
        clientAuthorization == .keep && placement.clientSends(head, query: query)
    }

    /// `client_authorization: reject` and the client sent its own credential there (400).
    func rejectsClientAuthorization(_ head: borrowing RequestHead, query: String?) -> Bool {
        clientAuthorization == .reject && placement.clientSends(head, query: query)
    }

    /// The credential of one request sent with `token` (nil: the client's own goes, keep mode):
    /// the token's DPoP binding when the route allows one, and on a `type: aws` route the SigV4 step
    /// for the body `bodyToSign` gives. Throws the answer when the request cannot be signed: 503 for
    /// credentials without AWS keys, 413 for a body that streams and must be signed.
    @inline(__always)
    func resolve(token: TokenSnapshot?, bodyToSign: () -> SigV4RequestSigner.Body) throws(ProxyError) -> RequestCredential {
        // A `type: aws` route signs instead (the one test the other routes pay).
        if case .signed(let signer) = placement, let token {
            guard let credentials = token.aws else { throw .tokenUnavailable("the credentials hold no AWS keys", retryAfter: 1) }
            guard let step = signer.step(credentials: credentials, body: bodyToSign()) else { throw .bodyTooLarge }
            return RequestCredential(placement: placement, token: token, signing: step)
        }
        return RequestCredential(placement: placement, token: token, dpop: dpopEnabled ? token?.dpop : nil)
    }
}

/// The credential of one upstream request (CONTRACT.md "Where the credential goes"), resolved once
/// per request from the route's placement and the current token (`RouteCredential.resolve`): the
/// bearer line, another field, a query parameter, a DPoP-bound token with its proof, or a SigV4
/// step. `Forwarder.writeRequestHead` asks it three things only: which client fields to drop
/// (`dropsClientAuthorization`, `drops`, `keepsHopByHop`), how to rewrite the target
/// (`upstreamTarget`: the query, and a signed request's path), and which fields to append
/// (`appendFields`). A value of references that already exist (the token's line, the route's
/// field or parameter, the signer): on the plain path it allocates nothing.
///
/// The sandbox's placeholders plug in here: a placeholder check is one more outcome of
/// `RouteCredential.resolve` (the client's placeholder stands where `drops` looks, and the real
/// value is what `appendFields` writes in its place). The values scrubbed from the answer are the
/// ones this value sends (the token, its Basic or query spelling, a DPoP-bound token, the AWS
/// keys): `ScrubPatterns.values` reads them from the same placement and token.
struct RequestCredential {
    enum Kind {
        /// No token: the client's own credential goes (`client_authorization: keep`); a client's
        /// Proxy-Authorization, hop-by-hop, still goes when that is the placement's field.
        case clientOwn(keptHopByHop: InjectedField?)
        /// `line` in place of the client's Authorization: the snapshot's `Authorization: Bearer`
        /// line (`TokenSnapshot.authorizationField`) or an `inject` format of Authorization or Basic.
        case authorization
        /// `line` is another field's, whose client copy makes way.
        case field(InjectedField)
        /// The token as a query parameter (`inject.query`).
        case query(InjectedQueryParameter, TokenSnapshot)
        /// RFC 9449 §7.1: `line` is `Authorization: DPoP <token>` whatever `inject` says, with a
        /// fresh proof.
        case dpop(DPoPBinding)
        /// A `type: aws` request: no token field; the signature's fields instead.
        case signed(SigV4RequestSigner.Step)
    }

    /// `kind`'s case without its payload: what the plain path tests, with no copy of `kind`.
    private enum Case { case clientOwn, authorization, field, query, dpop, signed }

    let kind: Kind
    private let kindCase: Case
    /// The token's field line (`authorization`, `field`, `dpop`); empty for the others.
    let line: [UInt8]

    /// Pure: where `token` goes under `placement`; `dpop` the token's binding when the route allows
    /// one; `signing` a `type: aws` request's step.
    @inline(__always)
    init(placement: CredentialPlacement, token: TokenSnapshot?, dpop: DPoPBinding? = nil, signing: SigV4RequestSigner.Step? = nil) {
        if let signing {
            (kind, kindCase, line) = (.signed(signing), .signed, [])
            return
        }
        guard let token else {
            if case .field(let field) = placement, field.isHopByHop {
                kind = .clientOwn(keptHopByHop: field)
            } else {
                kind = .clientOwn(keptHopByHop: nil)
            }
            (kindCase, line) = (.clientOwn, [])
            return
        }
        if let dpop {
            (kind, kindCase, line) = (.dpop(dpop), .dpop, token.authorizationField)
            return
        }
        switch placement {
        case .authorization:
            (kind, kindCase, line) = (.authorization, .authorization, token.authorizationField)
        case .field(let field):
            if field.isAuthorization {
                (kind, kindCase, line) = (.authorization, .authorization, field.line(for: token))
            } else {
                (kind, kindCase, line) = (.field(field), .field, field.line(for: token))
            }
        case .query(let parameter):
            (kind, kindCase, line) = (.query(parameter, token), .query, [])
        case .signed:
            // Without a step nothing signs (`RouteCredential.resolve` always makes one): the client's
            // Authorization still makes way, and no token goes.
            (kind, kindCase, line) = (.authorization, .authorization, [])
        }
    }

    // MARK: 1. which client fields to drop

    /// Whether the client's Authorization makes way for the credential's.
    @inline(__always)
    var dropsClientAuthorization: Bool {
        switch kindCase {
        case .authorization, .dpop, .signed: return true
        case .clientOwn, .field, .query: return false
        }
    }

    /// Whether `drops` may drop a field by its name: the plain path skips it.
    @inline(__always)
    var dropsFieldsByName: Bool {
        switch kindCase {
        case .field, .dpop, .signed: return true
        case .clientOwn, .authorization, .query: return false
        }
    }

    /// Whether client field `index` (end to end, not Host or Authorization) stays out: the field the
    /// token goes in, a proof beside the proxy's (RFC 9449 §4.3: exactly one), the fields a signature
    /// sets (`SigV4RequestSigner.Step.drops`, which notes the signed fields that go).
    func drops(_ index: Int, of fields: FieldBlock) -> Bool {
        switch kind {
        case .field(let field): return fields.nameEquals(index, lowercasedName: field.lowercasedName)
        case .dpop: return fields.nameEquals(index, "dpop")
        case .signed(let step): return step.drops(index, of: fields)
        case .clientOwn, .authorization, .query: return false
        }
    }

    /// Whether hop-by-hop field `index` goes all the same: a client's own Proxy-Authorization, kept.
    @inline(__always)
    func keepsHopByHop(_ index: Int, of fields: FieldBlock) -> Bool {
        guard kindCase == .clientOwn, case .clientOwn(let kept?) = kind else { return false }
        return fields.nameEquals(index, lowercasedName: kept.lowercasedName)
    }

    // MARK: 2. how to rewrite the target

    /// Whether the target changes (`upstreamTarget`): the token in the query, or a signed path.
    @inline(__always)
    var rewritesTarget: Bool { kindCase == .query || kindCase == .signed }

    /// The request line's target: `basePath` and `path` as they are, with the token in the query
    /// (`inject.query`); a signed request's path in the one form an SDK sends, which is also the form
    /// signed (`AWSServiceRules.upstreamPath`).
    func upstreamTarget(basePath: String, path: String, query: String?) -> UpstreamTarget {
        switch kind {
        case .query(let parameter, let token):
            return UpstreamTarget(pathPrefix: basePath, path: path, query: parameter.query(query, with: token))
        case .signed:
            return UpstreamTarget(pathPrefix: "", path: AWSServiceRules.upstreamPath(basePath + path), query: query)
        case .clientOwn, .authorization, .field, .dpop:
            return UpstreamTarget(pathPrefix: basePath, path: path, query: query)
        }
    }

    // MARK: 3. which fields to append

    /// Appends the credential's fields after the client's: the token's line; a DPoP proof for this
    /// method and URL (`origin` the upstream's); a signature over the fields that went, the Host
    /// `sentHost` gives among them. `target`, `origin` and `sentHost` are asked only by the
    /// credential that needs them (not on the Bearer path).
    @inline(__always)
    func appendFields(
        to out: ByteBuffer, method: String, target: () -> UpstreamTarget, origin: @autoclosure () -> String, sentHost: () -> String?
    ) {
        switch kindCase {
        case .authorization, .field:
            out.append(line)
        case .dpop:
            out.append(line)
            appendProof(to: out, method: method, target: target(), origin: origin())
        case .signed:
            guard case .signed(let step) = kind else { return }
            let target = target()
            if let host = sentHost() { step.noteHost(host) }
            step.appendSignature(to: out, method: method, path: target.path, query: target.query)
        case .clientOwn, .query:
            break
        }
    }

    /// RFC 9449 §7.1: a fresh proof for this method and the upstream URL.
    private func appendProof(to out: ByteBuffer, method: String, target: UpstreamTarget, origin: String) {
        guard case .dpop(let binding) = kind else { return }
        RequestWriter.appendField(
            out, name: "DPoP", value: binding.proof(method: method, url: origin + target.pathPrefix + target.path, origin: origin))
    }
}

/// A request line's target as it goes upstream: prefix and path written one after the other, and
/// the query without its `?`.
struct UpstreamTarget {
    var pathPrefix: String
    var path: String
    var query: String?
}
