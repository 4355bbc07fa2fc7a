// Shortest paths on a generated graph (tests/e2e/profile-dep-brute.sh): a CSR graph built from
// an edge list, breadth-first levels with a deque, Dijkstra with a binary heap, and a histogram
// of the distances; prints checksums. Containers are sized before use: no block is freed and
// reused while the graph is walked (dep-brute.py compares two runs whose heaps differ, and its
// brute force, from a trace without heap events, cannot forget a freed block as 'dep' does).
#include <cstdio>
#include <cstdlib>
#include <queue>
#include <utility>
#include <vector>

namespace
{

struct Edge {
    int from, to;
    unsigned weight;
};

class Graph
{
  public:
    explicit Graph(int n) : first_(n + 1, 0)
    {
    }

    void build(const std::vector<Edge> &edges)
    {
        for (const Edge &e : edges)
            first_[e.from + 1]++;
        for (size_t v = 1; v < first_.size(); v++)
            first_[v] += first_[v - 1];
        to_.resize(edges.size());
        weight_.resize(edges.size());
        at_.assign(first_.begin(), first_.end() - 1);
        for (const Edge &e : edges) {
            to_[at_[e.from]] = e.to;
            weight_[at_[e.from]++] = e.weight;
        }
    }

    int size() const
    {
        return (int)first_.size() - 1;
    }
    size_t edges() const
    {
        return to_.size();
    }

    template <typename F> void neighbours(int v, F f) const
    {
        for (int i = first_[v]; i < first_[v + 1]; i++)
            f(to_[i], weight_[i]);
    }

  private:
    std::vector<int> first_, to_, at_; /* at_ a member: a block freed would be reused (see top) */
    std::vector<unsigned> weight_;
};

// q: the caller's, so that its block outlives the walk (see the top)
std::vector<int> levels(const Graph &g, int src, std::vector<int> &q)
{
    std::vector<int> level(g.size(), -1);
    size_t head = 0;

    q.reserve(g.size());
    level[src] = 0;
    q.push_back(src);
    while (head < q.size()) {
        int v = q[head++];
        g.neighbours(v, [&](int w, unsigned) {
            if (level[w] < 0) {
                level[w] = level[v] + 1;
                q.push_back(w);
            }
        });
    }
    return level;
}

std::vector<unsigned long> dijkstra(const Graph &g, int src)
{
    typedef std::pair<unsigned long, int> Item;
    std::vector<unsigned long> dist(g.size(), ~0ul);
    std::vector<Item> store;
    store.reserve(g.edges() + 1);
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap(std::greater<Item>(),
                                                                          std::move(store));

    dist[src] = 0;
    heap.push(Item(0, src));
    while (!heap.empty()) {
        Item top = heap.top();
        heap.pop();
        if (top.first != dist[top.second])
            continue;
        g.neighbours(top.second, [&](int w, unsigned wt) {
            if (top.first + wt < dist[w]) {
                dist[w] = top.first + wt;
                heap.push(Item(dist[w], w));
            }
        });
    }
    return dist;
}

} // namespace

int main(int argc, char **argv)
{
    int n = argc > 1 ? std::atoi(argv[1]) : 2000, deg = argc > 2 ? std::atoi(argv[2]) : 4;
    unsigned long seed = 7, sum = 0;
    std::vector<Edge> edges;

    edges.reserve((size_t)n * (size_t)deg);

    for (int v = 0; v < n; v++)
        for (int k = 0; k < deg; k++) {
            seed = seed * 6364136223846793005ul + 1442695040888963407ul;
            edges.push_back(
                Edge{v, (int)((seed >> 33) % (unsigned long)n), 1 + (unsigned)(seed >> 60)});
        }
    Graph g(n);
    g.build(edges);
    std::vector<int> q;
    std::vector<int> level = levels(g, 0, q);
    std::vector<unsigned long> dist = dijkstra(g, 0);
    std::vector<int> hist(64, 0);
    for (int v = 0; v < n; v++) {
        if (level[v] >= 0)
            hist[level[v] < 63 ? level[v] : 63]++;
        if (dist[v] != ~0ul)
            sum += dist[v];
    }
    for (int i = 0; i < 64; i++)
        if (hist[i])
            std::printf("level %d: %d\n", i, hist[i]);
    std::printf("distance sum %lu\n", sum);
    return 0;
}
