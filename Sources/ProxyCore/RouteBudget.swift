import Config
import Logs
import Synchronization

/// One route's `budget` as every loop shares it (CONTRACT.md "Programs in a sandbox", "Budgets"):
/// a `CallerBudget` per caller behind one small lock, taken only by requests of a route that has a
/// budget, and the refusals counted for `tokenproxy_budget_refusals_total`. Kept in the route's
/// `RouteState`, so a reload that leaves the budget as it was keeps its counts.
final class RouteBudget: Sendable {
    let configuration: BudgetConfiguration

    private struct State {
        var callers: [String: CallerBudget] = [:]
        var refusals: [String: LabeledCounts<BudgetRefusal>] = [:]
    }
    private let state = Mutex(State())

    init(_ configuration: BudgetConfiguration) {
        self.configuration = configuration
    }

    /// One more request of `caller` at `now` (monotonic seconds).
    func admit(caller: String, now: Double) -> CallerBudget.Decision {
        state.withLock { s in
            let decision = s.callers[caller, default: CallerBudget(configuration, now: now)].admit(now: now)
            if case .refused(let why, _) = decision { s.refusals[caller, default: LabeledCounts()].increment(why) }
            return decision
        }
    }

    func release(caller: String) {
        state.withLock { $0.callers[caller]?.release() }
    }

    /// The place an admitted request holds until its exchange ends (`Exchange.releaseBudget`).
    struct Hold {
        let budget: RouteBudget
        let caller: String
    }

    /// `tokenproxy_budget_refusals_total{route,caller,reason}`: every caller seen, both reasons.
    func collect(route: String, into registry: inout MetricRegistry) {
        let (callers, refusals) = state.withLock { ($0.callers.keys.sorted(), $0.refusals) }
        for caller in callers {
            (refusals[caller] ?? LabeledCounts()).collect(
                MetricCatalog.budgetRefusalsTotal, as: "reason", labels: [MetricLabel("route", route), MetricLabel("caller", caller)],
                into: &registry)
        }
    }
}

extension Exchange {
    /// Admits the request of `caller` (its placeholder's caller, else `PlaceholderConfiguration.defaultCaller`)
    /// under its route's budget, holding its place until the exchange ends; the 429 to answer when
    /// it is over the budget (nothing goes upstream then).
    func admitUnderBudget(_ budget: RouteBudget, caller: String, now: Double) -> ProxyError? {
        switch budget.admit(caller: caller, now: now) {
        case .admitted:
            budgetHold = RouteBudget.Hold(budget: budget, caller: caller)
            return nil
        case .refused(let why, let retryAfter):
            return .rateLimited(why, retryAfter: retryAfter)
        }
    }

    /// Gives the budget's place back: once, however the exchange ends (its answer done, the client
    /// gone, an upstream failure, a 101's tunnel), since only the first call finds the hold.
    func releaseBudget() {
        guard let hold = budgetHold else { return }
        budgetHold = nil
        hold.budget.release(caller: hold.caller)
    }
}
