import Config
import Foundation
import Sockets

/// `login: browser` (CONTRACT.md "Logging in a person"): the authorization code grant (RFC 6749
/// §4.1) with PKCE S256 (RFC 7636) through the person's own browser and a loopback redirect
/// (RFC 8252). The code, the verifier and the tokens are registered as secrets before anything could
/// log them.
extension OAuth2Provider {
    func browserLogin(_ options: BrowserLoginOptions, prompt: @escaping (String) -> Void) throws -> IssuedToken {
        guard let endpoint = try endpoint(\.authorizationURL, name: "authorization_url") else {
            throw TokenSourceError.configuration("login: browser needs credentials.authorization_url (or an issuer that names one)")
        }
        guard let clientID else { throw TokenSourceError.configuration("login: browser needs credentials.client_id") }
        // Bound before any browser opens: a taken port ends the login here (RFC 8252 §8.3).
        let listener = try options.listen(redirect)
        defer { listener.close() }
        // A new verifier and state each time (RFC 7636 §4.1, RFC 6749 §10.12).
        let pkce = PKCE.random()
        let state = LoginRandom.token()
        registerSecret(pkce.verifier)
        let request = AuthorizationRequest(
            endpoint: endpoint, clientID: clientID, redirectURI: listener.redirectURI, scope: scope, state: state,
            codeChallenge: pkce.challenge, loginHint: options.loginHint, audience: audience, extra: authorizationParams)
        let url = request.url
        prompt("To sign in, open this address in a browser:\n\(url)")
        if options.openBrowser {
            options.launchBrowser(at: url, prompt: prompt)
        } else {
            options.showURL(url)
            prompt("After signing in, paste here the address the browser was sent to (it starts with \(listener.redirectURI)):")
        }
        let rules = CallbackRules(path: redirect.path, state: state)
        let outcome = try listener.wait(rules: rules, timeout: options.timeout, pasteFD: options.openBrowser ? nil : options.pasteFD, say: prompt)
        switch outcome {
        case .timedOut:
            throw TokenSourceError.refused("no sign-in arrived within \(Units.formatDuration(options.timeout)) (--timeout)")
        case .denied(let error, let description, let reply):
            reply?.send(
                status: 200, reason: "OK", title: "Sign-in failed",
                message: "The identity provider answered \(error)\(description.map { ": \($0)" } ?? ""). You can close this window.")
            throw TokenSourceError.refused("the identity provider answered the sign-in with \(error)\(description.map { ": \($0)" } ?? "")")
        case .code(let code, let reply):
            registerSecret(code)
            do {
                // Exactly once: the code is single-use (RFC 6749 §4.1.2), so a failure is not retried.
                let issued = try tokenRequest(
                    [
                        ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", listener.redirectURI),
                        ("code_verifier", pkce.verifier),
                    ],
                    call: "code exchange", secrets: [code, pkce.verifier], scopeAndAudience: false)
                reply?.send(status: 200, reason: "OK", title: "Signed in", message: "tokenproxy is signed in. You can close this window.")
                return issued
            } catch let error as TokenSourceError {
                reply?.send(status: 200, reason: "OK", title: "Sign-in failed", message: "The code exchange failed: \(error.reason)")
                throw error
            }
        }
    }
}

extension BrowserLoginOptions {
    /// `$BROWSER` (a program, run without a shell), else `xdg-open` where there is a display; the
    /// URL is on stderr either way.
    func launchBrowser(at url: String, prompt: (String) -> Void) {
        let program: String
        if let browser = browser, !browser.isEmpty {
            program = browser
        } else if hasDisplay {
            program = "xdg-open"
        } else {
            prompt("(no $BROWSER and no display: open the address yourself, or use --no-browser)")
            return
        }
        do {
            try ProcessRunner.launch([program, url])
        } catch {
            prompt("(\(error); open the address yourself)")
        }
    }
}

/// Who logged in, for `login` to say (CONTRACT: shown only, never trusted).
enum LoginIdentity {
    static func person(idToken: String?, accessToken: String) -> String? {
        if let idToken {
            registerSecret(idToken)
            if let name = name(in: idToken) { return name }
        }
        return name(in: accessToken)
    }

    private static func name(in token: String) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = JWT.base64URLDecode(parts[1]), let claims = JSONValue.parse(Array(payload)) else { return nil }
        for claim in ["preferred_username", "email", "upn", "sub"] {
            if let value = claims[claim]?.string, !value.isEmpty {
                return CallbackRules.shown(value, limit: 200)
            }
        }
        return nil
    }
}
