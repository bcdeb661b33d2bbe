import Basics
import Config
import HTTP1
import Logs
import Sockets
import Synchronization

/// A route's placeholders as one loop checks them (CONTRACT.md "Programs in a sandbox"): a request
/// passes only with one of the route's placeholders at the credential's spot, and is known from then
/// on by its caller's name. Built per loop and route (`LoopRoutes`; a request host's route shares
/// its template's), touched only on its loop's thread. With `callers_file`, the callers are the
/// process's `CallersFileReader`'s last snapshot, taken at the loop's sweep (`refresh`), never from
/// a request: a request reads only this loop's copy, with no lock and no atomic.
final class PlaceholderGate {
    let spot: PlaceholderSpot
    private(set) var callers: PlaceholderCallers
    /// The process's reader of `placeholder.callers_file`; nil for one value.
    let callersFile: CallersFileReader?
    /// The reader's generation `callers` comes from.
    private var generation: Int

    /// nil for a route without `placeholder`. `reader`: the route's shared reader of its
    /// `callers_file` (`RouteState.callersFile`); without one (a policy a test or the admin
    /// listener makes) the gate gets a reader of its own.
    init?(_ route: RouteConfiguration, reader: CallersFileReader?, now: Double = 0) {
        guard let placeholder = route.placeholder else { return nil }
        spot = PlaceholderSpot(inject: route.inject, signsRequests: route.credentials.source.awsSigning != nil)
        callersFile = reader ?? CallersFileReader(placeholder, now: now)
        if let callersFile {
            (callers, generation) = callersFile.current()
        } else {
            callers = PlaceholderCallers(placeholder.callers)
            generation = 0
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

    /// From the loop's sweep: the reader looks at `callers_file` when a look is due (one loop of
    /// the process does), then this loop takes the reader's snapshot when it is newer than its own
    /// (one atomic load when it is not). Answers the line for the log when this call read the file.
    func refresh(now: Double) -> (line: String, failed: Bool)? {
        guard let callersFile else { return nil }
        let news = callersFile.lookIfDue(now: now)
        if callersFile.generation != generation { (callers, generation) = callersFile.current() }
        return news
    }
}

/// A route's `callers_file` for the whole process: one per route (`RouteState.callersFile`), shared
/// by every loop. The first loop whose sweep finds a look due (`lookIfDue`) stats the file and,
/// when its inode, size or times changed, reads and parses it, once for all loops, and publishes
/// the callers as one immutable snapshot; each loop's `PlaceholderGate` takes it at its own next
/// sweep. A file that is gone or no longer valid publishes no caller at all (fail closed) until it
/// is fixed.
final class CallersFileReader: Sendable {
    let path: String
    /// How often the file is looked at (one stat): with the loops' sweep (`FixedLimits.sweepInterval`)
    /// a removed line is refused within a second of the change (CONTRACT.md).
    static let lookInterval = 0.5

    /// The snapshot's number, raised after each one is published: what a loop compares.
    private let published = Atomic<Int>(0)
    private let snapshot: Mutex<(callers: PlaceholderCallers, generation: Int)>
    /// The file as last read, and when it was last looked at; held by the loop that looks.
    private let look: Mutex<(signature: FileSignature?, time: Double)>

    /// nil for a placeholder of one value. Reads the file as it is now, which may be newer than the
    /// load's reading of it (`placeholder.callers`, kept when the file no longer reads).
    init?(_ placeholder: PlaceholderConfiguration, now: Double) {
        guard let path = placeholder.callersFile else { return nil }
        self.path = path
        let signature = FileSignature.of(path)
        var callers = placeholder.callers
        if case .success(let read) = CallersFile.read(path) { callers = read }
        for caller in callers { SecretRegistry.shared.register(caller.value) }
        snapshot = Mutex((PlaceholderCallers(callers), 0))
        look = Mutex((signature, now))
    }

    /// The number of the snapshot published last.
    var generation: Int { published.load(ordering: .acquiring) }

    /// The snapshot published last, and its number.
    func current() -> (callers: PlaceholderCallers, generation: Int) {
        snapshot.withLock { $0 }
    }

    /// At most every `lookInterval`, by whichever loop comes first (one that finds another loop
    /// looking goes on at once): reads the file again when it changed and publishes its callers.
    /// Answers a line for the log when something changed, and whether it is a failure.
    func lookIfDue(now: Double) -> (line: String, failed: Bool)? {
        let news = look.withLockIfAvailable { look -> (line: String, failed: Bool)? in
            guard now - look.time >= Self.lookInterval else { return nil }
            look.time = now
            let signature = FileSignature.of(path)
            guard signature != look.signature else { return nil }
            look.signature = signature
            switch CallersFile.read(path) {
            case .success(let read):
                for caller in read { SecretRegistry.shared.register(caller.value) }
                publish(PlaceholderCallers(read))
                return ("placeholder.callers_file \(path) read again: \(read.count) caller(s)", false)
            case .failure(let problems):
                publish(PlaceholderCallers([]))
                return ("placeholder.callers_file: every caller is refused until the file is fixed: " + problems.lines.joined(separator: "; "), true)
            }
        }
        return news ?? nil
    }

    /// Only under `look`: one writer at a time.
    private func publish(_ callers: PlaceholderCallers) {
        let next = snapshot.withLock { snapshot in
            snapshot = (callers, snapshot.generation + 1)
            return snapshot.generation
        }
        published.store(next, ordering: .releasing)
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
        candidate.withUnsafeBytes { candidate in
            for i in values.indices {
                let same = values[i].withUnsafeBytes { constantTimeEquals($0, candidate) }
                found = same ? i : found
            }
        }
        return found >= 0 ? names[found] : nil
    }
}
