// Package plan computes who probes whom. It imports only the standard
// library and api (whose Peer and AgentPlan are its input and output on
// the wire) and is pure: the same peers, in any order, give the same
// plans, so two matrix replicas compute identical plans.
//
// Before it, each agent computed its own Pingmesh plan (every node of
// its rack, node i of every other rack): its load grew with the racks,
// and its cap silently dropped targets, so with no rack label above ~300
// nodes most nodes were never probed (issue 14).
//
// Build computes the whole cluster's plan at once, in the matrix, with
// guarantees at any size and whatever the labels:
//
//   - Classes. Node agents probe node agents (node_to_node). Pod agents
//     probe pod agents (pod_to_pod), their own node and the nodes their
//     node probes (pod_to_node), so a pod's view of the nodes is its node's.
//     Every agent probes every LB target (node_to_lb, pod_to_lb). Node and
//     pod agents are planned alike, each class over its own members.
//   - Within a group, members sit on a ring in hash order (not name
//     order, which often follows the chassis) and each probes the members
//     at offsets 1, 2, 4, ... (expander-like shortcuts), then the smallest
//     unused: each member is probed by exactly InGroup members of its
//     group (default 8, at least 3), or by all others when the group is
//     smaller. The load stays flat however big the group.
//   - Across groups, member j of group b is probed by a member of group
//     b+1+(j mod g-1), the probers taken round-robin in their group: every
//     member has a prober in another group, and when groups have at least
//     g-1 members this covers every ordered pair of groups with probes
//     that leave from and land on many members of each. Pairs left over
//     (many small groups) are assigned round-robin too, one probe each.
//   - Budget. No agent has more than MaxTargets (default 256) targets, LB
//     targets included; with pod agents each class gets half of what the
//     LBs leave, as a pod agent carries both. Where the pairs of groups
//     (or a lone group's duties toward a big one) outnumber the budget,
//     Round picks a share of them and RotationRounds says how many rounds
//     cover them all: a matrix that advances Round every plan period covers
//     every pair in RotationRounds periods. With racks of 40 up to 10,000
//     nodes, or zones, one round covers all. The guarantees need the LBs
//     to leave each class room for its ring and a few probes across
//     groups (with 256 targets, up to ~230 LBs); past that the ring
//     shrinks to fit.
//
// TestPlanCoverage measures these guarantees from 100 to 10,000 nodes;
// docs/performance.md keeps its table.
package plan
