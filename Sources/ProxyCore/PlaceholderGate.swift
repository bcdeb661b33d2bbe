import Basics
import Config
import HTTP1
import Logs
import Sockets

/// A route's placeholders as one loop checks them (CONTRACT.md "Programs in a sandbox"): a request
/// passes only with one of the route's placeholders at the credential's spot, and is known from then
/// on by its caller's name. Built per loop and route (`AccessPolicy`), touched only on its loop's
/// thread; a `callers_file` is looked at again from the loop's sweep (`refresh`), never from a
/// request, and its new callers replace the old ones as a whole.
final class PlaceholderGate {
    let spot: PlaceholderSpot
    private(set) var callers: PlaceholderCallers
    /// `placeholder.callers_file`; nil for one value.
    let callersFile: String?
    private var fileSignature: FileSignature?
    private var lastLook: Double

    /// How often the sweep looks at `callers_file` (one stat): a removed line is refused within a
    /// second of the change (CONTRACT.md).
    static let lookInterval = 0.5

    /// nil for a route without `placeholder`.
    init?(_ route: RouteConfiguration, now: Double = 0) {
        guard let placeholder = route.placeholder else { return nil }
        spot = PlaceholderSpot(inject: route.inject, signsRequests: route.credentials.source.awsSigning != nil)
        callersFile = placeholder.callersFile
        lastLook = now
        callers = PlaceholderCallers(placeholder.callers)
        if let path = callersFile {
            // The file as it is now, which may be newer than the load's reading of it.
            fileSignature = FileSignature.of(path)
            if case .success(let read) = CallersFile.read(path) {
                for caller in read { SecretRegistry.shared.register(caller.value) }
                callers = PlaceholderCallers(read)
            }
        }
    }

    /// The caller whose placeholder `head` carries at the spot, or the refusal: 403
    /// `placeholder_required`, or 401 with a Basic challenge when a Basic route's request has no
    /// Authorization at all.
    func admit(_ head: borrowing RequestHead, query: String?) -> Result<String, ProxyError> {
        switch spot.read(head, query: query) {
        case .absent:
            return .failure(.placeholderRequired(challenge: spot.challengesWhenAbsent))
        case .malformed:
            return .failure(.placeholderRequired(challenge: false))
        case .candidate(let value):
            guard let caller = callers.caller(of: value) else { return .failure(.placeholderRequired(challenge: false)) }
            return .success(caller)
        }
    }

    /// From the loop's sweep: at most every `lookInterval`, reads `callers_file` again when its
    /// inode, size or times changed. A file that is gone or no longer valid refuses every caller
    /// (fail closed) until it is fixed. Answers a line for the log when something changed, and
    /// whether it is a failure.
    func refresh(now: Double) -> (line: String, failed: Bool)? {
        guard let path = callersFile, now - lastLook >= Self.lookInterval else { return nil }
        lastLook = now
        let signature = FileSignature.of(path)
        guard signature != fileSignature else { return nil }
        fileSignature = signature
        switch CallersFile.read(path) {
        case .success(let read):
            for caller in read { SecretRegistry.shared.register(caller.value) }
            callers = PlaceholderCallers(read)
            return ("placeholder.callers_file \(path) read again: \(read.count) caller(s)", false)
        case .failure(let problems):
            callers = PlaceholderCallers([])
            return ("placeholder.callers_file: every caller is refused until the file is fixed: " + problems.lines.joined(separator: "; "), true)
        }
    }
}

/// A route's callers at one moment, immutable: their names and their placeholders' bytes.
struct PlaceholderCallers {
    let names: [String]
    let values: [[UInt8]]

    init(_ callers: [PlaceholderCaller]) {
        names = callers.map(\.name)
        values = callers.map { Array($0.value.utf8) }
    }

    /// The caller whose placeholder is `candidate`. Every placeholder is compared, in constant time
    /// each (Basics/ConstantTime.swift), with no early exit: the time taken tells neither how much of
    /// a value was right nor which caller matched.
    func caller(of candidate: ArraySlice<UInt8>) -> String? {
        var found = -1
        for i in values.indices {
            let same = constantTimeEquals(values[i], candidate)
            found = same ? i : found
        }
        return found >= 0 ? names[found] : nil
    }
}
