import CSystem
import Glibc

/// Something registered with an event loop for readiness on one file descriptor.
public protocol EventHandler: AnyObject {
    /// `events` is the epoll mask (EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP...).
    func handleEvents(_ events: UInt32)
}

public struct Interest: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let read = Interest(rawValue: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
    public static let write = Interest(rawValue: EPOLLOUT.rawValue)
    /// A listening socket: readable means a connection waits to be accepted. Plain EPOLLIN, because
    /// beside `exclusive` epoll takes only EPOLLIN, EPOLLOUT, EPOLLWAKEUP and EPOLLET (epoll_ctl(2):
    /// anything else, EPOLLRDHUP included, is EINVAL).
    public static let accept = Interest(rawValue: EPOLLIN.rawValue)
    /// Only one of the loops sharing a listener is woken (unix sockets: no SO_REUSEPORT). Combine it
    /// with `accept` only; such a registration cannot be changed with `modify` either (epoll_ctl(2)):
    /// `unregister`, then `register` again.
    public static let exclusive = Interest(rawValue: EPOLLEXCLUSIVE.rawValue)
}

public typealias TimerID = UInt64

/// Work for `EventLoop.schedule(task:)`: an object that runs once after the current batch of events,
/// without a closure allocated for it.
public protocol LoopTask: AnyObject {
    func runLoopTask()
}

/// One epoll instance driven by one thread. Everything registered with it is touched only on that
/// thread; other threads hand it work with `execute`, which wakes it through an eventfd.
// @unchecked: the mutable state (handlers, timers, tasks) is touched only on the loop's own thread;
// other threads reach it only through `pending`, guarded by `pendingLock`, and the eventfd wake-up.
public final class EventLoop: @unchecked Sendable {
    public let index: Int
    private let epfd: Int32
    private let wakeFD: Int32
    private var handlers: [EventHandler?] = []
    /// Tasks from other threads. A pthread mutex rather than Synchronization's `Mutex`: when that one
    /// is contended it waits inside the Swift runtime, where ThreadSanitizer cannot see the lock, and
    /// reports a race that is none (docs/RELIABILITY.md, "Sanitizers").
    private let pendingLock = OSCondition()
    private var pending: [@Sendable () -> Void] = []
    /// Timers due later. Running or cancelling a timer takes it out, so a fired or cancelled timer
    /// leaves nothing behind (docs/RELIABILITY.md, "Refused connections").
    private var timers = TimerHeap()
    /// `schedule(after: 0)`: run after the current batch of events, in order, without the heap.
    private var immediate: [Timer] = []
    /// The batch of immediate timers running now; a cancelled one loses its callback.
    private var immediateRunning: [Timer] = []
    private var tasks: [LoopTask] = []
    private var tasksRunning: [LoopTask] = []
    private var nextTimerID: TimerID = 1
    private var stopping = false
    /// Monotonic seconds, refreshed once per loop iteration.
    public private(set) var now: Double = EventLoop.monotonicNow()

    public init(index: Int) throws {
        self.index = index
        epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epfd >= 0 else { throw SocketError("epoll_create1") }
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wakeFD >= 0 else { throw SocketError("eventfd") }
        var ev = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: wakeFD))
        guard epoll_ctl(epfd, EPOLL_CTL_ADD, wakeFD, &ev) == 0 else { throw SocketError("epoll_ctl") }
    }

    deinit {
        Syscall.close(epfd)
        Syscall.close(wakeFD)
    }

    public static func monotonicNow() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    // MARK: registration (loop thread only, or before the loop's thread starts: starting it orders the two)

    public func register(_ fd: Int32, _ interest: Interest, _ handler: EventHandler) throws {
        if Int(fd) >= handlers.count { handlers.append(contentsOf: repeatElement(nil, count: Int(fd) + 64 - handlers.count)) }
        handlers[Int(fd)] = handler
        var ev = epoll_event(events: interest.rawValue, data: epoll_data_t(fd: fd))
        if epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0 {
            handlers[Int(fd)] = nil
            throw SocketError("epoll_ctl(ADD)")
        }
    }

    public func modify(_ fd: Int32, _ interest: Interest) {
        var ev = epoll_event(events: interest.rawValue, data: epoll_data_t(fd: fd))
        _ = epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev)
    }

    /// Sets the interest of `fd` for `handler`: EPOLL_CTL_MOD, or ADD when epoll no longer knows the
    /// descriptor (it was closed and its number reused since it was registered).
    public func reregister(_ fd: Int32, _ interest: Interest, _ handler: EventHandler) throws {
        if Int(fd) >= handlers.count { handlers.append(contentsOf: repeatElement(nil, count: Int(fd) + 64 - handlers.count)) }
        handlers[Int(fd)] = handler
        var ev = epoll_event(events: interest.rawValue, data: epoll_data_t(fd: fd))
        if epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) == 0 { return }
        if errno == ENOENT, epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 { return }
        handlers[Int(fd)] = nil
        throw SocketError("epoll_ctl(MOD)")
    }

    /// Whether `handler` is the one registered for `fd`.
    public func isRegistered(_ fd: Int32, _ handler: EventHandler) -> Bool {
        Int(fd) < handlers.count && handlers[Int(fd)] === handler
    }

    /// Removes the handler only if it is still the one registered (a closed and reused fd may belong to another).
    public func unregister(_ fd: Int32, _ handler: EventHandler) {
        guard Int(fd) < handlers.count, handlers[Int(fd)] === handler else { return }
        handlers[Int(fd)] = nil
        _ = epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nil)
    }

    // MARK: timers (loop thread only)

    /// Runs `callback` once, `seconds` from now (0 or less: after the current batch of events).
    /// Timers that are due together run in the order they were scheduled.
    @discardableResult
    public func schedule(after seconds: Double, _ callback: @escaping () -> Void) -> TimerID {
        let id = nextTimerID
        nextTimerID += 1
        if seconds <= 0 {
            immediate.append(Timer(deadline: 0, id: id, callback: callback))
        } else {
            timers.push(Timer(deadline: EventLoop.monotonicNow() + seconds, id: id, callback: callback))
        }
        return id
    }

    /// Runs `task.runLoopTask()` after the current batch of events (like `schedule(after: 0)`, with
    /// no allocation). Not cancellable: the task checks its own state.
    public func schedule(task: LoopTask) {
        tasks.append(task)
    }

    /// A cancelled timer never runs; it is removed at once, with its callback and what that
    /// captured. Cancelling a timer that already ran, the one running now, or an unknown id does
    /// nothing and keeps nothing.
    public func cancel(_ id: TimerID) {
        if timers.remove(id) != nil { return }
        if let i = immediate.firstIndex(where: { $0.id == id }) {
            immediate.remove(at: i)
            return
        }
        if let i = immediateRunning.firstIndex(where: { $0.id == id }) {
            immediateRunning[i].callback = nil
        }
    }

    /// Timers scheduled that have neither run nor been cancelled (the batch running now aside).
    var timerCount: Int { timers.count + immediate.count }

    // MARK: cross-thread

    /// Runs `task` on the loop's thread. Safe from any thread.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        pendingLock.lock()
        pending.append(task)
        let wasEmpty = pending.count == 1
        pendingLock.unlock()
        if wasEmpty { wake() }
    }

    private func wake() {
        var one: UInt64 = 1
        _ = Syscall.uninterrupted { Glibc.write(wakeFD, &one, 8) }
    }

    public func stop() {
        execute { [unowned self] in self.stopping = true }
    }

    // MARK: the loop

    /// Runs until `stop()`. Call on the thread that owns this loop.
    public func run() {
        let maxEvents = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: maxEvents)
        defer { events.deallocate() }
        while !stopping {
            now = EventLoop.monotonicNow()
            var timeoutMS: Int32 = -1
            if !immediate.isEmpty || !tasks.isEmpty {
                timeoutMS = 0
            } else if let first = timers.peek() {
                timeoutMS = Int32(clamping: Int(max(0, (first.deadline - now) * 1000).rounded(.up)))
            }
            // Interrupted (-1, EINTR), the wait just ends early: the turn goes on and the next
            // wait computes its timeout again, so it is not retried here.
            let n = epoll_wait(epfd, events, Int32(maxEvents), timeoutMS)
            now = EventLoop.monotonicNow()
            if n > 0 {
                for i in 0..<Int(n) {
                    let fd = events[i].data.fd
                    if fd == wakeFD {
                        var value: UInt64 = 0
                        _ = Syscall.uninterrupted { Glibc.read(wakeFD, &value, 8) }
                        continue
                    }
                    if Int(fd) < handlers.count, let handler = handlers[Int(fd)] {
                        handler.handleEvents(events[i].events)
                    }
                }
            }
            runPending()
            runDueTimers()
        }
    }

    /// Drops the handlers, timers and tasks of a loop whose `run()` has returned, on the thread that
    /// waited for that. They hold their owners, which hold the loop: a loop let go before the process
    /// ends (the engine harness's, one per test) is freed only so. Not on the request path.
    public func releaseAfterRun() {
        handlers = []
        timers = TimerHeap()
        immediate = []
        immediateRunning = []
        tasks = []
    }

    private func runPending() {
        pendingLock.lock()
        let tasks = pending
        pending.removeAll(keepingCapacity: true)
        pendingLock.unlock()
        for task in tasks { task() }
    }

    private func runDueTimers() {
        // Tasks scheduled while these run wait for the next turn (after the next epoll_wait).
        if !tasks.isEmpty {
            swap(&tasks, &tasksRunning)
            for task in tasksRunning { task.runLoopTask() }
            tasksRunning.removeAll(keepingCapacity: true)
        }
        if !immediate.isEmpty {
            // Timers scheduled with 0 while these run wait for the next turn, like tasks.
            swap(&immediate, &immediateRunning)
            for i in immediateRunning.indices {
                guard let callback = immediateRunning[i].callback else { continue }
                immediateRunning[i].callback = nil
                callback()
            }
            immediateRunning.removeAll(keepingCapacity: true)
        }
        while let first = timers.peek(), first.deadline <= now {
            // Out of the heap before it runs: a timer that cancels itself finds nothing to cancel.
            timers.pop()?.callback?()
        }
    }
}

struct Timer {
    let deadline: Double
    let id: TimerID
    var callback: (() -> Void)?

    /// Earlier deadline first; on a tie, the timer scheduled first (ids grow).
    func precedes(_ other: Timer) -> Bool {
        deadline < other.deadline || (deadline == other.deadline && id < other.id)
    }
}

/// A binary min-heap of timers that also finds a timer by id, so that a cancelled one is taken out
/// at once instead of waiting in the heap for its deadline.
struct TimerHeap {
    private var items: [Timer] = []
    /// Where each timer sits in `items`.
    private var positions: [TimerID: Int] = [:]

    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }
    /// For tests: every timer has exactly one position, and it is right.
    var isConsistent: Bool {
        positions.count == items.count && items.indices.allSatisfy { positions[items[$0].id] == $0 }
    }
    func peek() -> Timer? { items.first }

    mutating func push(_ timer: Timer) {
        items.append(timer)
        positions[timer.id] = items.count - 1
        siftUp(items.count - 1)
    }

    @discardableResult
    mutating func pop() -> Timer? {
        guard !items.isEmpty else { return nil }
        return remove(at: 0)
    }

    /// Takes out the timer with `id`; nil when it is not in the heap.
    @discardableResult
    mutating func remove(_ id: TimerID) -> Timer? {
        guard let index = positions[id] else { return nil }
        return remove(at: index)
    }

    private mutating func remove(at index: Int) -> Timer {
        let last = items.count - 1
        if index != last { swapAt(index, last) }
        let removed = items.removeLast()
        positions[removed.id] = nil
        if index < items.count {
            siftDown(index)
            siftUp(index)
        }
        return removed
    }

    private mutating func swapAt(_ a: Int, _ b: Int) {
        items.swapAt(a, b)
        positions[items[a].id] = a
        positions[items[b].id] = b
    }

    private mutating func siftUp(_ start: Int) {
        var i = start
        while i > 0 {
            let parent = (i - 1) / 2
            guard items[i].precedes(items[parent]) else { break }
            swapAt(parent, i)
            i = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var i = start
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var m = i
            if l < items.count, items[l].precedes(items[m]) { m = l }
            if r < items.count, items[r].precedes(items[m]) { m = r }
            if m == i { break }
            swapAt(i, m)
            i = m
        }
    }
}

/// The bits of the epoll mask handed to `EventHandler.handleEvents`, for modules that do not import epoll.
public enum ReadyEvents {
    public static let readable: UInt32 = EPOLLIN.rawValue
    public static let writable: UInt32 = EPOLLOUT.rawValue
    /// Error or hang-up (both directions closed).
    public static let failed: UInt32 = EPOLLERR.rawValue | EPOLLHUP.rawValue
    /// The peer shut down its writing side.
    public static let peerClosed: UInt32 = EPOLLRDHUP.rawValue
}

// MARK: the thread a loop runs on, and the lock its task queue takes

/// A detached POSIX thread that runs one closure. Foundation's `Thread` would do the same, but
/// using it pages in CoreFoundation's thread and run-loop machinery, which an idle proxy then
/// keeps resident for nothing.
public enum OSThread {
    /// The closure travels to the new thread as a retained object; the thread releases it.
    private final class Body {
        let name: String
        let run: () -> Void
        init(_ name: String, _ run: @escaping () -> Void) {
            self.name = String(decoding: Array(name.utf8.prefix(15)), as: UTF8.self)
            self.run = run
        }
    }

    /// Starts `body` on a new thread. `name` is what ps and gdb show (the kernel keeps 15 bytes);
    /// `stackSize` nil keeps the system's default.
    public static func start(name: String, stackSize: Int? = nil, _ body: @escaping () -> Void) throws {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        if let stackSize { pthread_attr_setstacksize(&attributes, max(stackSize, Int(PTHREAD_STACK_MIN))) }
        let context = Unmanaged.passRetained(Body(name, body)).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(
            &thread, &attributes,
            { context in
                let body = Unmanaged<Body>.fromOpaque(context!).takeRetainedValue()
                _ = tp_set_thread_name(body.name)
                body.run()
                return nil
            }, context)
        guard status == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw SocketError("pthread_create", errno: status)
        }
    }
}

extension OSThread {
    /// The calling thread, to tell threads apart (pthread_self).
    public static var currentID: UInt { UInt(pthread_self()) }
}

/// A mutex with one condition variable (pthread), in place of Foundation's `NSCondition` for the same
/// reason as `OSThread`. Timed waits use the monotonic clock, so a wall-clock jump neither cuts a
/// wait short nor stretches it.
// @unchecked: a pthread mutex and condition variable, which exist to be shared between threads; the
// pointers themselves never change after init.
public final class OSCondition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }
    public func broadcast() { pthread_cond_broadcast(condition) }

    /// Waits for a broadcast (the lock held on entry and on return).
    public func wait() { pthread_cond_wait(condition, mutex) }

    /// Waits for a broadcast or until `seconds` have passed; false on the timeout.
    @discardableResult
    public func wait(seconds: Double) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let whole = seconds.rounded(.down)
        var nanoseconds = Int(deadline.tv_nsec) + Int((seconds - whole) * 1_000_000_000)
        deadline.tv_sec += Int(whole) + nanoseconds / 1_000_000_000
        nanoseconds %= 1_000_000_000
        deadline.tv_nsec = nanoseconds
        return pthread_cond_timedwait(condition, mutex, &deadline) == 0
    }
}
