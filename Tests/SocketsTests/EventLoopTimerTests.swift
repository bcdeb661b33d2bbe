import Testing

@testable import Sockets

/// Runs `loop` on the calling thread until something calls `stop()`. A safety timer stops it after
/// 30 s so that a broken test fails instead of hanging; it is cancelled before returning, so the
/// loop's timer bookkeeping holds only what the test left.
func runUntilStopped(_ loop: EventLoop) {
    let safety = loop.schedule(after: 30) {
        Issue.record("the loop was still running after 30 s")
        loop.stop()
    }
    loop.run()
    loop.cancel(safety)
}

@Suite("event loop: timers")
struct EventLoopTimerTests {
    @Test("timers run in the order of their deadlines, timers of 0 first")
    func timersRunInDeadlineOrder() throws {
        let loop = try EventLoop(index: 0)
        var ran: [String] = []
        loop.schedule(after: 0.03) {
            ran.append("30 ms")
            loop.stop()
        }
        loop.schedule(after: 0.01) { ran.append("10 ms") }
        loop.schedule(after: 0) { ran.append("0 a") }
        loop.schedule(after: 0.02) { ran.append("20 ms") }
        loop.schedule(after: 0) { ran.append("0 b") }
        runUntilStopped(loop)
        #expect(ran == ["0 a", "0 b", "10 ms", "20 ms", "30 ms"])
        #expect(loop.timerCount == 0)
    }

    @Test("a timer of 0 scheduled by a timer of 0 runs on the next turn, after the ones already queued")
    func immediateTimersScheduledWhileRunningWaitForTheNextTurn() throws {
        let loop = try EventLoop(index: 0)
        var ran: [String] = []
        loop.schedule(after: 0) {
            ran.append("a")
            loop.schedule(after: 0) {
                ran.append("c")
                loop.stop()
            }
        }
        loop.schedule(after: 0) { ran.append("b") }
        runUntilStopped(loop)
        #expect(ran == ["a", "b", "c"])
        #expect(loop.timerCount == 0)
    }

    @Test("a timer cancelled before it is due never runs, and leaves nothing behind")
    func cancelBeforeFiring() throws {
        let loop = try EventLoop(index: 0)
        var ran: [String] = []
        let later = loop.schedule(after: 0.01) { ran.append("cancelled later") }
        let now = loop.schedule(after: 0) { ran.append("cancelled now") }
        loop.cancel(later)
        loop.cancel(now)
        #expect(loop.timerCount == 0)
        loop.schedule(after: 0.02) {
            ran.append("stop")
            loop.stop()
        }
        runUntilStopped(loop)
        #expect(ran == ["stop"])
        #expect(loop.timerCount == 0)
    }

    @Test("cancelling a timer that already ran does nothing, also while other timers are pending")
    func cancelAfterFiring() throws {
        let loop = try EventLoop(index: 0)
        var ran: [String] = []
        // A timer that outlives the test, as the 0.2 s sweeper outlives every connection: before
        // the fix, cancelled ids were forgotten only when no timer at all was pending.
        let background = loop.schedule(after: 3600) { ran.append("background") }
        let first = loop.schedule(after: 0.005) { ran.append("first") }
        let immediate = loop.schedule(after: 0) { ran.append("immediate") }
        loop.schedule(after: 0.02) {
            loop.cancel(first)
            loop.cancel(immediate)
            loop.cancel(first)
            loop.cancel(987_654)  // never scheduled
            ran.append("stop")
            loop.stop()
        }
        runUntilStopped(loop)
        #expect(ran == ["immediate", "first", "stop"])
        #expect(loop.timerCount == 1)
        loop.cancel(background)
        #expect(loop.timerCount == 0)
    }

    @Test("a timer may cancel itself, and a timer due in the same turn, from inside its callback")
    func cancelFromInsideATimer() throws {
        let loop = try EventLoop(index: 0)
        var ran: [String] = []
        let background = loop.schedule(after: 3600) {}
        var selfID: TimerID = 0
        var victimID: TimerID = 0
        var immediateVictim: TimerID = 0
        loop.schedule(after: 0) {
            ran.append("immediate")
            loop.cancel(immediateVictim)
        }
        immediateVictim = loop.schedule(after: 0) { ran.append("immediate victim") }
        selfID = loop.schedule(after: 0.005) {
            ran.append("self")
            loop.cancel(selfID)  // what a lingering connection's close() does when its own timer ends it
            loop.cancel(victimID)
        }
        // Due before it is looked at: both are due in the same turn, the first cancels the second.
        victimID = loop.schedule(after: 0.0051) { ran.append("victim") }
        loop.schedule(after: 0.03) { loop.stop() }
        runUntilStopped(loop)
        #expect(ran == ["immediate", "self"])
        #expect(loop.timerCount == 1)
        loop.cancel(background)
    }

    /// The leak of issue 23 point 5: every refused connection whose client outlived the 2 s linger
    /// left its timer's id in the loop for good (26 bytes each), because its timer's callback
    /// closed the connection and `close()` cancelled the running timer.
    @Test("10,000 lingering closes that cancel their own running timer leave the bookkeeping as it was")
    func selfCancellingTimersDoNotAccumulate() throws {
        let loop = try EventLoop(index: 0)
        let background = loop.schedule(after: 3600) {}
        let count = 10_000
        var closed = 0
        final class Lingering {
            var timer: TimerID?
            var isClosed = false
            let loop: EventLoop
            let done: () -> Void
            init(loop: EventLoop, done: @escaping () -> Void) {
                self.loop = loop
                self.done = done
            }
            func close() {
                guard !isClosed else { return }
                isClosed = true
                if let timer { loop.cancel(timer) }
                done()
            }
        }
        // The loop keeps a registered connection alive (its handler table); here, this array does.
        var connections: [Lingering] = []
        for _ in 0..<count {
            let connection = Lingering(loop: loop) {
                closed += 1
                if closed == count { loop.stop() }
            }
            connection.timer = loop.schedule(after: 0.001) { [weak connection] in connection?.close() }
            connections.append(connection)
        }
        runUntilStopped(loop)
        let allClosed = connections.allSatisfy { $0.isClosed }
        #expect(allClosed)
        #expect(loop.timerCount == 1)
        loop.cancel(background)
    }

    @Test("timers cancelled long before they are due leave the loop at once")
    func cancelledTimersLeaveAtOnce() throws {
        let loop = try EventLoop(index: 0)
        let background = loop.schedule(after: 3600) {}
        for _ in 0..<10_000 {
            let id = loop.schedule(after: 2) {}
            #expect(loop.timerCount == 2)
            loop.cancel(id)
            #expect(loop.timerCount == 1)
        }
        loop.cancel(background)
        #expect(loop.timerCount == 0)
    }

    @Test("a cancelled timer's callback is released at once, with what it captured")
    func cancelReleasesTheCallback() throws {
        let loop = try EventLoop(index: 0)
        final class Captured {}
        weak var weakly: Captured?
        var ids: [TimerID] = []
        do {
            let captured = Captured()
            weakly = captured
            ids.append(loop.schedule(after: 60) { _ = captured })
            ids.append(loop.schedule(after: 0) { _ = captured })
        }
        #expect(weakly != nil)
        for id in ids { loop.cancel(id) }
        #expect(weakly == nil)
    }
}

@Suite("event loop: the timer heap")
struct TimerHeapTests {
    private func timer(_ deadline: Double, _ id: Int) -> Timer {
        Timer(deadline: deadline, id: TimerID(id), callback: {})
    }

    @Test("pops by deadline, and by scheduling order on equal deadlines")
    func popsInOrder() {
        var heap = TimerHeap()
        var generator = SystemRandomNumberGenerator()
        var timers: [Timer] = []
        for id in 1...500 { timers.append(timer(Double(Int.random(in: 0..<50, using: &generator)), id)) }
        for t in timers.shuffled() { heap.push(t) }
        #expect(heap.isConsistent)
        var popped: [TimerID] = []
        while let t = heap.pop() { popped.append(t.id) }
        #expect(popped == timers.sorted { $0.precedes($1) }.map(\.id))
        #expect(heap.isConsistent && heap.isEmpty)
    }

    @Test("taking timers out by id anywhere in the heap keeps the others in order")
    func removeByID() {
        var heap = TimerHeap()
        for id in 1...300 { heap.push(timer(Double((id * 37) % 101), id)) }
        for id in stride(from: 3, through: 300, by: 3) { #expect(heap.remove(TimerID(id))?.id == TimerID(id)) }
        #expect(heap.remove(3) == nil)
        #expect(heap.remove(999) == nil)
        #expect(heap.count == 200)
        #expect(heap.isConsistent)
        var last: Timer?
        while let t = heap.pop() {
            #expect(t.id % 3 != 0)
            if let last { #expect(last.precedes(t)) }
            last = t
        }
        #expect(heap.isConsistent)
    }
}
