import CSystem
import Glibc

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
