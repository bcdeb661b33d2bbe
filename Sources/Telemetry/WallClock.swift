import Glibc

/// Span and record times: Unix time in nanoseconds (OTLP's `fixed64 …_unix_nano`), read from the
/// vDSO's CLOCK_REALTIME, which costs no system call.
public enum WallClock {
    public static func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }
}
