import Config
import Foundation
import IdentityHTTP

/// `type: gce_metadata` and `type: azure_managed_identity`: the platform's metadata service hands
/// out tokens for the identity the machine or pod runs as, with no secret in the configuration.
/// Each fetch asks again (like client_credentials). Answers that are not what the documented
/// protocol returns are passing failures, named; no token ever reaches a message.
///
/// - GCE / GKE workload identity: `GET /computeMetadata/v1/instance/service-accounts/ACCOUNT/token`
///   with `Metadata-Flavor: Google` (JSON `access_token`, `expires_in`); with `audience`, the ID token
///   of `.../identity?audience=AUD&format=full` (the answer is the JWT itself; its `exp` counts).
/// - Azure managed identity: IMDS `GET /metadata/identity/oauth2/token?api-version=2018-02-01&resource=R`
///   with `Metadata: true`; where `IDENTITY_ENDPOINT` and `IDENTITY_HEADER` are set (App Service,
///   Container Apps, Functions) that endpoint with `api-version=2019-08-01` and `X-IDENTITY-HEADER`.
///   `expires_in` and `expires_on` come as strings of seconds.
public final class CloudIdentityProvider: IdentityProvider {
    public let kind: String
    public let fetchesWithoutSession = true
    let request: HTTPCallRequest
    /// The answer is the token itself (a GCE ID token), not JSON.
    let plainAnswer: Bool
    var isGCE: Bool { kind == CredentialsType.gceMetadata.rawValue }
    var timeout: Double = 10

    /// The two metadata identities.
    public enum Identity: Sendable, Equatable {
        case gce(GCEMetadataConfiguration)
        case azure(AzureManagedIdentityConfiguration)
    }

    public convenience init(_ identity: Identity) {
        self.init(identity, environment: ProcessInfo.processInfo.environment)
    }

    init(_ identity: Identity, environment: [String: String]) {
        switch identity {
        case .gce(let credentials):
            kind = CredentialsType.gceMetadata.rawValue
            let base = Self.trimmed(credentials.endpoint ?? "http://metadata.google.internal")
            // A path segment (RFC 3986 §3.3): an e-mail's "@" stays as it is.
            let account = FormEncoding.encode(credentials.serviceAccount).replacingOccurrences(of: "%40", with: "@")
            let prefix = "\(base)/computeMetadata/v1/instance/service-accounts/\(account)"
            if let audience = credentials.audience {
                request = HTTPCallRequest(
                    url: "\(prefix)/identity?audience=\(FormEncoding.encode(audience))&format=full", method: "GET",
                    headers: ["Metadata-Flavor: Google"])
                plainAnswer = true
            } else {
                var url = "\(prefix)/token"
                if let scope = credentials.scope, !scope.isEmpty {
                    let scopes = scope.split(separator: " ").map { FormEncoding.encode(String($0)) }.joined(separator: ",")
                    url += "?scopes=\(scopes)"
                }
                request = HTTPCallRequest(url: url, method: "GET", headers: ["Metadata-Flavor: Google", "Accept: application/json"])
                plainAnswer = false
            }
        case .azure(let credentials):
            kind = CredentialsType.azureManagedIdentity.rawValue
            // Managed identity takes a resource; a v2 scope "R/.default" names the resource R.
            var resource = credentials.resource ?? credentials.scope ?? ""
            if resource.hasSuffix("/.default") { resource.removeLast("/.default".count) }
            var query = "resource=\(FormEncoding.encode(resource))"
            if let clientID = credentials.clientID { query += "&client_id=\(FormEncoding.encode(clientID))" }
            if let endpoint = environment["IDENTITY_ENDPOINT"], !endpoint.isEmpty, let header = environment["IDENTITY_HEADER"], !header.isEmpty {
                registerSecret(header)
                let separator = endpoint.contains("?") ? "&" : "?"
                request = HTTPCallRequest(
                    url: "\(endpoint)\(separator)api-version=2019-08-01&\(query)", method: "GET",
                    headers: ["X-IDENTITY-HEADER: \(header)", "Accept: application/json"])
            } else {
                let base = Self.trimmed(credentials.endpoint ?? "http://169.254.169.254")
                request = HTTPCallRequest(
                    url: "\(base)/metadata/identity/oauth2/token?api-version=2018-02-01&\(query)", method: "GET",
                    headers: ["Metadata: true", "Accept: application/json"])
            }
            plainAnswer = false
        }
    }

    private static func trimmed(_ url: String) -> String {
        var url = url
        while url.hasSuffix("/") { url.removeLast() }
        return url
    }

    public func refresh(_ session: StoredSession?) throws -> IssuedToken {
        var call = request
        call.timeout = timeout
        call.direct = true
        let response: HTTPCallResponse
        do {
            response = try BlockingHTTPClient.perform(call)
        } catch {
            throw TokenSourceError.cannotReach("the metadata service for \(kind)", error)
        }
        // Google's metadata server marks every answer so; anything else (a captive portal, a proxy,
        // another server on that name) is not it, and its "token" is not trusted.
        if isGCE, response.header("metadata-flavor") != "Google" {
            throw TokenSourceError.passing("the answer for \(kind) did not come from a GCE metadata server (no Metadata-Flavor: Google)")
        }
        guard (200..<300).contains(response.status) else {
            let said = JSONValue.parse(response.body)?["error"]?.string.flatMap(OAuth2ErrorAnswer.errorCode)
            let text = "the metadata service answered HTTP \(response.status)\(said.map { " (\($0))" } ?? "") for \(kind)"
            if response.status == 400 || response.status == 403 || response.status == 404 {
                throw TokenSourceError.configuration("\(text); check the identity, service_account, resource or client_id")
            }
            throw TokenSourceError.passing(text, cause: .of(status: response.status))
        }
        return try Self.read(response, plain: plainAnswer, kind: kind)
    }

    /// The token of a 2xx answer; pure.
    static func read(_ response: HTTPCallResponse, plain: Bool, kind: String) throws -> IssuedToken {
        if plain {
            let token = String(decoding: response.body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard JWT.claims(of: token) != nil, BearerToken.isUsable(token) else {
                throw TokenSourceError.passing("the metadata service's answer for \(kind) is not an ID token (a JWT)")
            }
            registerSecret(token)
            return IssuedToken(accessToken: token, serverDate: response.date)
        }
        guard let answer = JSONValue.parse(response.body), case .object = answer else {
            throw TokenSourceError.passing("the metadata service's answer for \(kind) is not a JSON object")
        }
        guard let token = answer["access_token"]?.string, !token.isEmpty, BearerToken.isUsable(token) else {
            throw TokenSourceError.passing("the metadata service's answer for \(kind) has no usable access_token")
        }
        registerSecret(token)
        var issued = IssuedToken(accessToken: token, serverDate: response.date)
        // GCE sends numbers; Azure sends strings of digits.
        func seconds(_ name: String) -> Double? {
            switch answer[name] {
            case .number(let value)?: return value
            case .string(let text)?: return Double(text)
            default: return nil
            }
        }
        if let expiresIn = seconds("expires_in"), expiresIn > 0, expiresIn <= OAuth2Provider.longestLifetime {
            issued.expiresIn = expiresIn
        } else if let expiresOn = seconds("expires_on"), expiresOn > 0 {
            issued.expiresAt = expiresOn
        }
        return issued
    }

    public func login(_ input: LoginInput, prompt: @escaping (String) -> Void) throws -> IssuedToken {
        try refresh(nil)
    }

    public func revoke(refreshToken: String) throws {}
}
