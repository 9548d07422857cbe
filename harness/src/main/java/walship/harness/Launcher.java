package walship.harness;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.ClusterMetrics;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HBaseTestingUtility;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.MiniHBaseCluster;
import org.apache.hadoop.hbase.NamespaceDescriptor;
import org.apache.hadoop.hbase.ServerMetrics;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.StartMiniClusterOption;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.io.hfile.CacheConfig;
import org.apache.hadoop.hbase.io.hfile.HFile;
import org.apache.hadoop.hbase.io.hfile.HFileContextBuilder;
import org.apache.hadoop.hbase.master.cleaner.HFileCleaner;
import org.apache.hadoop.hbase.regionserver.HRegion;
import org.apache.hadoop.hbase.regionserver.HRegionServer;
import org.apache.hadoop.hbase.regionserver.HStore;
import org.apache.hadoop.hbase.replication.ReplicationLoadSource;
import org.apache.hadoop.hbase.replication.ReplicationPeerConfig;
import org.apache.hadoop.hbase.replication.ReplicationPeerConfigBuilder;
import org.apache.hadoop.hbase.replication.ReplicationPeerDescription;
import org.apache.hadoop.hbase.tool.BulkLoadHFiles;
import org.apache.hadoop.hbase.util.CommonFSUtils;
import org.apache.hadoop.hbase.util.JVMClusterUtil.RegionServerThread;
import org.apache.hadoop.hbase.util.VersionInfo;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hbase.thirdparty.com.google.gson.Gson;
import org.apache.hbase.thirdparty.com.google.gson.GsonBuilder;
import org.apache.hbase.thirdparty.com.google.gson.JsonArray;
import org.apache.hbase.thirdparty.com.google.gson.JsonElement;
import org.apache.hbase.thirdparty.com.google.gson.JsonObject;
import org.apache.hbase.thirdparty.com.google.gson.JsonParser;

/**
 * Runs one real HBase cluster (HBase's own test cluster: MiniHBaseCluster, optionally on a
 * MiniDFSCluster, on an external ZooKeeper or a MiniZooKeeperCluster) with HBase's Thrift1 and
 * Thrift2 servers, for walship's tests and demo.
 *
 * <p>Prints one JSON ready line on stdout, then reads one JSON command per line on stdin and
 * answers each with one JSON line: {@code {"ok": true, "result": ...}} or
 * {@code {"ok": false, "error": "..."}}. End of input or {@code {"cmd": "stop"}} stops the
 * cluster. Everything HBase logs goes to stderr.
 *
 * <p>Options: {@code --name N --data-dir D [--regionservers 3] [--zk host:port]
 * [--znode-parent /hbase] [--wal-fs local|hdfs] [--secure file.json] [--yarn queue,queue]
 * [--conf key=value]...}
 * ({@code --secure}: Kerberos everywhere, see {@link SecureMode}; with it a third Thrift
 * server, Thrift2 over HTTP behind SPNEGO, is started; {@code --yarn}: a YARN with these
 * queues on the cluster's HDFS, see {@link YarnMode}).
 */
public final class Launcher {
  private static final Gson GSON = new GsonBuilder().disableHtmlEscaping().serializeNulls().create();
  private static final HexFormat HEX = HexFormat.of();

  private final Map<String, String> opts = new HashMap<>();
  private final Map<String, String> confs = new HashMap<>();
  private HBaseTestingUtility util;
  private MiniDFSCluster dfs;
  private ThriftRunner thrift1;
  private ThriftRunner thrift2;
  private ThriftRunner thrift2Http;
  private SecureMode secure;
  private YarnMode yarn;
  private PrintStream out;

  public static void main(String[] args) throws Exception {
    PrintStream protocol = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    System.setOut(System.err); // whatever HBase prints must not reach the protocol stream
    Launcher launcher = new Launcher();
    launcher.out = protocol;
    int code = 0;
    try {
      launcher.parse(args);
      launcher.start();
      launcher.serve();
    } catch (Throwable t) {
      System.err.println("walship-harness: " + t);
      t.printStackTrace(System.err);
      protocol.println(GSON.toJson(error(t)));
      code = 1;
    } finally {
      launcher.shutdown();
    }
    System.exit(code);
  }

  private void parse(String[] args) {
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (!a.startsWith("--") || i + 1 >= args.length) {
        throw new IllegalArgumentException("bad argument " + a + " (options take a value: --name N)");
      }
      String value = args[++i];
      if (a.equals("--conf")) {
        int eq = value.indexOf('=');
        if (eq <= 0) {
          throw new IllegalArgumentException("--conf takes key=value, not " + value);
        }
        confs.put(value.substring(0, eq), value.substring(eq + 1));
      } else {
        opts.put(a.substring(2), value);
      }
    }
    for (String required : List.of("name", "data-dir")) {
      if (!opts.containsKey(required)) {
        throw new IllegalArgumentException("--" + required + " is required");
      }
    }
    String walFs = opts.getOrDefault("wal-fs", "local");
    if (!walFs.equals("local") && !walFs.equals("hdfs")) {
      throw new IllegalArgumentException("--wal-fs is local or hdfs, not " + walFs);
    }
    if (opts.containsKey("yarn") && !walFs.equals("hdfs")) {
      throw new IllegalArgumentException("--yarn runs on the cluster's HDFS: it needs --wal-fs hdfs");
    }
  }

  private void start() throws Exception {
    File dataDir = new File(opts.get("data-dir")).getAbsoluteFile();
    dataDir.mkdirs();
    if (opts.containsKey("secure")) {
      secure = SecureMode.read(opts.get("secure"));
    }
    // HBaseTestingUtility keeps its local files under this directory
    System.setProperty("test.build.data.basedirectory", new File(dataDir, "test-data").getPath());
    Configuration conf = HBaseConfiguration.create();
    conf.setInt("hbase.master.info.port", -1);
    conf.setInt("hbase.regionserver.info.port", -1);
    conf.setBoolean("hbase.localcluster.assign.random.ports", true);
    conf.set("hbase.zookeeper.property.maxClientCnxns", "0");
    // region servers keep nothing back for the tests' short runs
    conf.setInt("hbase.client.retries.number", 10);
    conf.setInt("hbase.regionserver.handler.count", 10);
    conf.setInt("hbase.regionserver.metahandler.count", 5);
    conf.set("zookeeper.znode.parent", opts.getOrDefault("znode-parent", "/hbase"));
    // An aborted region server that has not stopped within hbase.regionserver.abort.timeout
    // (20 min) runs HBase's abort timeout task, which by default halts the JVM: right for a
    // region server in a process of its own, but this JVM holds the whole cluster (master,
    // every region server, the Thrift servers), so the harness's task only says so
    conf.set("hbase.regionserver.abort.timeout.task", AbortTimeoutWarning.class.getName());
    String zk = opts.get("zk");
    if (zk != null) {
      int colon = zk.lastIndexOf(':');
      if (colon <= 0) {
        throw new IllegalArgumentException("--zk takes host:port, not " + zk);
      }
      conf.set("hbase.zookeeper.quorum", zk.substring(0, colon));
      conf.set("hbase.zookeeper.property.clientPort", zk.substring(colon + 1));
    }
    util = new HBaseTestingUtility(conf);
    conf = util.getConfiguration();
    boolean hdfs = opts.getOrDefault("wal-fs", "local").equals("hdfs");
    if (secure != null) {
      secure.configure(conf, hdfs);
    }
    for (Map.Entry<String, String> e : confs.entrySet()) {
      conf.set(e.getKey(), e.getValue());
    }
    if (secure != null) {
      secure.login(conf);
    }
    if (hdfs) {
      conf.setBoolean("dfs.webhdfs.enabled", true);
      dfs = util.startMiniDFSCluster(1);
    } else {
      File walDir = new File(dataDir, "wal");
      walDir.mkdirs();
      conf.set("hbase.wal.dir", walDir.toURI().toString());
    }
    if (zk == null) {
      util.startMiniZKCluster();
    }
    int regionServers = Integer.parseInt(opts.getOrDefault("regionservers", "3"));
    util.startMiniHBaseCluster(StartMiniClusterOption.builder().numMasters(1)
      .numRegionServers(regionServers).createWALDir(false).build());
    // The master's HFile cleaner deletes empty directories under archive/ on the cleaner period
    // (every second on A, for its log cleaner) and, on the local file system, can delete one
    // between Hadoop's mkdir and chmod while a region server archives compacted files: the
    // region server then fails to close the region and aborts (seen on HBase 2.6). walship
    // reads WALs, never archived HFiles, so the harness keeps them: of the file cleaners, only the
    // log cleaner runs
    for (HFileCleaner cleaner : util.getMiniHBaseCluster().getMaster().getHFileCleaners()) {
      cleaner.setEnabled(false);
    }
    Configuration thriftConf = new Configuration(util.getConfiguration());
    thriftConf.setInt("hbase.thrift.info.port", -1);
    // The Thrift servers' client retries a region in transition (a move, split, merge, crash)
    // for as long as before (HBase's backoff table times 20 ms over 18 retries: 37.6 s; times
    // 100 ms over 10 retries: 38.1 s) but never waits more than 4 s between tries (10 s before),
    // so a write waiting on a region goes on soon after the region opens
    thriftConf.setInt("hbase.client.pause", 20);
    thriftConf.setInt("hbase.client.retries.number", 18);
    thrift1 = new ThriftRunner(new org.apache.hadoop.hbase.thrift.ThriftServer(
      new Configuration(thriftConf)), "thrift1");
    thrift2 = new ThriftRunner(new org.apache.hadoop.hbase.thrift2.ThriftServer(
      new Configuration(thriftConf)), "thrift2");
    thrift1.start();
    thrift2.start();
    if (secure != null) {
      Configuration httpConf = new Configuration(thriftConf);
      httpConf.setBoolean("hbase.regionserver.thrift.http", true);
      httpConf.setBoolean("hbase.thrift.support.proxyuser", true);
      // HTTP mode authenticates each request with SPNEGO; a SASL level above authentication is
      // refused there without TLS (HBase: "QoP is privacy, but hbase.thrift.ssl.enabled is false")
      httpConf.set("hbase.thrift.security.qop", "authentication");
      thrift2Http = new ThriftRunner(new org.apache.hadoop.hbase.thrift2.ThriftServer(httpConf),
        "thrift2-http");
      thrift2Http.start();
    }
    if (opts.containsKey("yarn")) {
      List<String> queues = new ArrayList<>();
      for (String q : opts.get("yarn").split(",")) {
        if (!q.isBlank()) {
          queues.add(q.strip());
        }
      }
      yarn = YarnMode.start(util.getConfiguration(), dataDir, queues);
    }
    JsonObject ready = info();
    ready.addProperty("ready", true);
    out.println(GSON.toJson(ready));
  }

  private JsonObject info() throws IOException {
    Configuration conf = util.getConfiguration();
    MiniHBaseCluster cluster = util.getMiniHBaseCluster();
    JsonObject o = new JsonObject();
    o.addProperty("name", opts.get("name"));
    o.addProperty("hbase_version", VersionInfo.getVersion());
    String quorum = conf.get("hbase.zookeeper.quorum") + ":"
      + conf.get("hbase.zookeeper.property.clientPort");
    o.addProperty("zk", quorum);
    o.addProperty("znode_parent", conf.get("zookeeper.znode.parent"));
    o.addProperty("cluster_key", quorum + ":" + conf.get("zookeeper.znode.parent"));
    o.addProperty("cluster_id", cluster.getMaster().getClusterId());
    Path walRoot = CommonFSUtils.getWALRootDir(conf);
    o.addProperty("wal_root", walRoot.toString());
    if (dfs != null) {
      // walship reads HDFS over WebHDFS: the NameNode's HTTP address
      String http = dfs.getNameNode().getHttpAddress().getHostString() + ":"
        + dfs.getNameNode().getHttpAddress().getPort();
      o.addProperty("webhdfs", http);
      o.addProperty("wal_url", "webhdfs://" + http + walRoot.toUri().getPath());
    } else {
      o.addProperty("webhdfs", (String) null);
      o.addProperty("wal_url", walRoot.toUri().getPath());
    }
    o.addProperty("root_dir", CommonFSUtils.getRootDir(conf).toString());
    o.addProperty("master", cluster.getMaster().getServerName().toString());
    JsonArray servers = new JsonArray();
    for (RegionServerThread t : cluster.getLiveRegionServerThreads()) {
      servers.add(t.getRegionServer().getServerName().toString());
    }
    o.add("regionservers", servers);
    o.addProperty("thrift", thrift1 == null ? null : "127.0.0.1:" + thrift1.port);
    o.addProperty("thrift2", thrift2 == null ? null : "127.0.0.1:" + thrift2.port);
    o.addProperty("thrift2_http", thrift2Http == null ? null : "127.0.0.1:" + thrift2Http.port);
    o.addProperty("secure", secure != null);
    o.addProperty("realm", secure == null ? null : secure.realm);
    // the host of every service principal (hbase/<host>, HTTP/<host>) clients must ask for
    o.addProperty("service_host", secure == null ? null : secure.serviceHost);
    o.add("yarn", yarn == null ? null : yarn.info());
    return o;
  }

  private void serve() throws IOException {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) {
        continue;
      }
      JsonObject answer;
      String cmd = null;
      try {
        JsonObject req = JsonParser.parseString(line).getAsJsonObject();
        cmd = str(req, "cmd");
        answer = new JsonObject();
        answer.addProperty("ok", true);
        answer.add("result", GSON.toJsonTree(run(cmd, req)));
      } catch (Throwable t) {
        System.err.println("walship-harness: command failed: " + line);
        t.printStackTrace(System.err);
        answer = error(t);
      }
      out.println(GSON.toJson(answer));
      if ("stop".equals(cmd)) {
        return;
      }
    }
  }

  private static JsonObject error(Throwable t) {
    Throwable root = t;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    JsonObject o = new JsonObject();
    o.addProperty("ok", false);
    o.addProperty("error", t.getClass().getSimpleName() + ": " + firstLine(t.getMessage())
      + (root == t ? "" : " (cause: " + root.getClass().getSimpleName() + ": "
        + firstLine(root.getMessage()) + ")"));
    return o;
  }

  private static String firstLine(String s) {
    if (s == null) {
      return "";
    }
    int nl = s.indexOf('\n');
    return nl < 0 ? s : s.substring(0, nl);
  }

  private Object run(String cmd, JsonObject req) throws Exception {
    Admin admin = util.getAdmin();
    MiniHBaseCluster cluster = util.getMiniHBaseCluster();
    switch (cmd) {
      case "info":
        return info();
      case "stop":
        return "stopping";
      case "create_namespace":
        admin.createNamespace(NamespaceDescriptor.create(str(req, "namespace")).build());
        return null;
      case "create_table":
        return createTable(admin, req);
      case "flush":
        if (req.has("table")) {
          admin.flush(TableName.valueOf(str(req, "table")));
        } else {
          util.flush();
        }
        return null;
      case "major_compact": {
        // flush, then a major compaction of every region of the table, done when this returns
        // (HBase 2.6's Thrift1 majorCompact runs a minor compaction, and Admin's is asynchronous);
        // the compacted files are archived at once, as HBase's discharger chore would later, so
        // a split daughter holds no reference to its parent afterwards (it may be merged)
        TableName table = TableName.valueOf(str(req, "table"));
        admin.flush(table);
        cluster.compact(table, true);
        for (HRegion region : cluster.getRegions(table)) {
          for (HStore store : region.getStores()) {
            store.closeAndArchiveCompactedFiles();
          }
        }
        return null;
      }
      case "bulk_load":
        return bulkLoad(req);
      case "roll": {
        List<String> rolled = new ArrayList<>();
        for (RegionServerThread t : cluster.getLiveRegionServerThreads()) {
          ServerName sn = t.getRegionServer().getServerName();
          if (!req.has("server") || sn.toString().equals(str(req, "server"))) {
            admin.rollWALWriter(sn);
            rolled.add(sn.toString());
          }
        }
        return rolled;
      }
      case "regions":
        return regions(admin, TableName.valueOf(str(req, "table")));
      case "move_region":
        if (req.has("server")) {
          admin.move(bytes(str(req, "region")), ServerName.valueOf(str(req, "server")));
        } else {
          admin.move(bytes(str(req, "region")));
        }
        return null;
      case "split_region":
        admin.splitRegionAsync(regionName(admin, str(req, "region")),
          req.has("split_key") ? HEX.parseHex(str(req, "split_key")) : null).get(2, TimeUnit.MINUTES);
        return null;
      case "merge_regions": {
        JsonArray names = req.getAsJsonArray("regions");
        byte[][] full = new byte[names.size()][];
        for (int i = 0; i < names.size(); i++) {
          full[i] = regionName(admin, names.get(i).getAsString());
        }
        admin.mergeRegionsAsync(full, false).get(2, TimeUnit.MINUTES);
        return null;
      }
      case "abort_rs": {
        String name = str(req, "server");
        List<RegionServerThread> threads = cluster.getRegionServerThreads();
        for (int i = 0; i < threads.size(); i++) {
          HRegionServer rs = threads.get(i).getRegionServer();
          if (rs.getServerName().toString().equals(name) && !rs.isAborted() && !rs.isStopped()) {
            cluster.abortRegionServer(i);
            return name;
          }
        }
        throw new IllegalArgumentException("no live region server " + name);
      }
      case "start_rs": {
        RegionServerThread t = cluster.startRegionServerAndWait(120_000);
        return t.getRegionServer().getServerName().toString();
      }
      case "add_peer":
        admin.addReplicationPeer(str(req, "peer"), peerConfig(req, ReplicationPeerConfig.newBuilder()),
          !"DISABLED".equals(req.has("state") ? str(req, "state") : "ENABLED"));
        return null;
      case "update_peer":
        admin.updateReplicationPeerConfig(str(req, "peer"),
          peerConfig(req, ReplicationPeerConfig.newBuilder(admin.getReplicationPeerConfig(str(req, "peer")))));
        return null;
      case "remove_peer":
        admin.removeReplicationPeer(str(req, "peer"));
        return null;
      case "enable_peer":
        admin.enableReplicationPeer(str(req, "peer"));
        return null;
      case "disable_peer":
        admin.disableReplicationPeer(str(req, "peer"));
        return null;
      case "list_peers":
        return listPeers(admin);
      case "replication_load":
        return replicationLoad(admin);
      default:
        throw new IllegalArgumentException("unknown command " + cmd);
    }
  }

  private Object createTable(Admin admin, JsonObject req) throws IOException {
    TableName name = TableName.valueOf(str(req, "table"));
    TableDescriptorBuilder table = TableDescriptorBuilder.newBuilder(name);
    JsonObject families = req.getAsJsonObject("families");
    if (families == null || families.size() == 0) {
      throw new IllegalArgumentException("create_table needs families: {\"f\": {\"scope\": 1}}");
    }
    for (Map.Entry<String, JsonElement> f : families.entrySet()) {
      JsonObject spec = f.getValue().getAsJsonObject();
      ColumnFamilyDescriptorBuilder cf = ColumnFamilyDescriptorBuilder.newBuilder(
        f.getKey().getBytes(StandardCharsets.UTF_8));
      if (spec.has("scope")) {
        cf.setScope(spec.get("scope").getAsInt());
      }
      if (spec.has("versions")) {
        cf.setMaxVersions(spec.get("versions").getAsInt());
      }
      table.setColumnFamily(cf.build());
    }
    JsonArray splits = req.getAsJsonArray("splits");
    if (splits != null && splits.size() > 0) {
      byte[][] keys = new byte[splits.size()][];
      for (int i = 0; i < splits.size(); i++) {
        keys[i] = HEX.parseHex(splits.get(i).getAsString());
      }
      admin.createTable(table.build(), keys);
    } else {
      admin.createTable(table.build());
    }
    return regions(admin, name);
  }

  /**
   * Bulk-load one HFile per family, written here from {"cells": [[family, row, qualifier,
   * value, ts], ...]} (hex, ts a number): HBase moves it into the region and logs a BULK_LOAD
   * marker in the WAL, without the cells. Returns the HFiles' paths before the load.
   */
  private List<String> bulkLoad(JsonObject req) throws Exception {
    Configuration conf = util.getConfiguration();
    TableName table = TableName.valueOf(str(req, "table"));
    FileSystem fs = FileSystem.get(conf);
    Path dir = new Path(util.getDataTestDirOnTestFS("bulk"), Long.toString(System.nanoTime()));
    Map<String, List<KeyValue>> byFamily = new java.util.TreeMap<>();
    for (JsonElement e : req.getAsJsonArray("cells")) {
      JsonArray c = e.getAsJsonArray();
      byte[] family = HEX.parseHex(c.get(0).getAsString());
      byFamily.computeIfAbsent(c.get(0).getAsString(), k -> new ArrayList<>()).add(new KeyValue(
        HEX.parseHex(c.get(1).getAsString()), family, HEX.parseHex(c.get(2).getAsString()),
        c.get(4).getAsLong(), HEX.parseHex(c.get(3).getAsString())));
    }
    List<String> files = new ArrayList<>();
    for (Map.Entry<String, List<KeyValue>> f : byFamily.entrySet()) {
      List<KeyValue> cells = f.getValue();
      cells.sort(KeyValue.COMPARATOR);
      Path file = new Path(new Path(dir, new String(HEX.parseHex(f.getKey()), StandardCharsets.UTF_8)), "hfile");
      try (HFile.Writer w = HFile.getWriterFactory(conf, new CacheConfig(conf)).withPath(fs, file)
        .withFileContext(new HFileContextBuilder().build()).create()) {
        for (KeyValue kv : cells) {
          w.append(kv);
        }
      }
      files.add(file.toString());
    }
    if (BulkLoadHFiles.create(conf).bulkLoad(table, dir).isEmpty()) {
      throw new IllegalStateException("nothing was bulk-loaded into " + table);
    }
    return files;
  }

  private List<Map<String, Object>> regions(Admin admin, TableName table) throws IOException {
    List<Map<String, Object>> out = new ArrayList<>();
    for (RegionServerThread t : util.getMiniHBaseCluster().getLiveRegionServerThreads()) {
      HRegionServer rs = t.getRegionServer();
      for (RegionInfo r : admin.getRegions(rs.getServerName())) {
        if (r.getTable().equals(table)) {
          Map<String, Object> m = new HashMap<>();
          m.put("region", r.getEncodedName());
          m.put("start", HEX.formatHex(r.getStartKey()));
          m.put("end", HEX.formatHex(r.getEndKey()));
          m.put("server", rs.getServerName().toString());
          out.add(m);
        }
      }
    }
    out.sort((a, b) -> ((String) a.get("start")).compareTo((String) b.get("start")));
    return out;
  }

  private static byte[] regionName(Admin admin, String encoded) throws IOException {
    for (RegionInfo r : admin.getRegions(TableName.valueOf("hbase:meta"))) {
      if (r.getEncodedName().equals(encoded)) {
        return r.getRegionName();
      }
    }
    for (TableName t : admin.listTableNames()) {
      for (RegionInfo r : admin.getRegions(t)) {
        if (r.getEncodedName().equals(encoded)) {
          return r.getRegionName();
        }
      }
    }
    throw new IllegalArgumentException("no region " + encoded);
  }

  private static ReplicationPeerConfig peerConfig(JsonObject req, ReplicationPeerConfigBuilder b) {
    if (req.has("cluster_key")) {
      b.setClusterKey(str(req, "cluster_key"));
    }
    if (req.has("serial")) {
      b.setSerial(req.get("serial").getAsBoolean());
    }
    if (req.has("bandwidth")) {
      b.setBandwidth(req.get("bandwidth").getAsLong());
    }
    if (req.has("replicate_all")) {
      b.setReplicateAllUserTables(req.get("replicate_all").getAsBoolean());
    }
    if (req.has("table_cfs")) {
      Map<TableName, List<String>> tableCfs = new HashMap<>();
      for (Map.Entry<String, JsonElement> e : req.getAsJsonObject("table_cfs").entrySet()) {
        List<String> families = new ArrayList<>();
        for (JsonElement f : e.getValue().getAsJsonArray()) {
          families.add(f.getAsString());
        }
        tableCfs.put(TableName.valueOf(e.getKey()), families.isEmpty() ? null : families);
      }
      b.setTableCFsMap(tableCfs);
      if (!req.has("replicate_all")) {
        b.setReplicateAllUserTables(false);
      }
    }
    if (req.has("namespaces")) {
      Set<String> namespaces = new java.util.HashSet<>();
      for (JsonElement n : req.getAsJsonArray("namespaces")) {
        namespaces.add(n.getAsString());
      }
      b.setNamespaces(namespaces);
      if (!req.has("replicate_all")) {
        b.setReplicateAllUserTables(false);
      }
    }
    if (req.has("configuration")) {
      for (Map.Entry<String, JsonElement> e : req.getAsJsonObject("configuration").entrySet()) {
        b.putConfiguration(e.getKey(), e.getValue().getAsString());
      }
    }
    return b.build();
  }

  private static List<Map<String, Object>> listPeers(Admin admin) throws IOException {
    List<Map<String, Object>> out = new ArrayList<>();
    for (ReplicationPeerDescription d : admin.listReplicationPeers()) {
      ReplicationPeerConfig c = d.getPeerConfig();
      Map<String, Object> m = new HashMap<>();
      m.put("peer", d.getPeerId());
      m.put("state", d.isEnabled() ? "ENABLED" : "DISABLED");
      m.put("cluster_key", c.getClusterKey());
      m.put("serial", c.isSerial());
      m.put("bandwidth", c.getBandwidth());
      m.put("replicate_all", c.replicateAllUserTables());
      m.put("configuration", c.getConfiguration());
      Map<String, List<String>> tableCfs = new HashMap<>();
      if (c.getTableCFsMap() != null) {
        c.getTableCFsMap().forEach((t, fs) -> tableCfs.put(t.getNameAsString(),
          fs == null ? List.of() : fs));
      }
      m.put("table_cfs", tableCfs);
      m.put("namespaces", c.getNamespaces() == null ? List.of() : new ArrayList<>(c.getNamespaces()));
      out.add(m);
    }
    return out;
  }

  private static Map<String, List<Map<String, Object>>> replicationLoad(Admin admin) throws IOException {
    Map<String, List<Map<String, Object>>> out = new HashMap<>();
    ClusterMetrics metrics = admin.getClusterMetrics(EnumSet.of(ClusterMetrics.Option.LIVE_SERVERS));
    for (Map.Entry<ServerName, ServerMetrics> e : metrics.getLiveServerMetrics().entrySet()) {
      List<Map<String, Object>> sources = new ArrayList<>();
      for (ReplicationLoadSource s : e.getValue().getReplicationLoadSourceList()) {
        Map<String, Object> m = new HashMap<>();
        m.put("peer", s.getPeerID());
        m.put("queue_id", s.getQueueId());
        m.put("recovered", s.isRecovered());
        m.put("running", s.isRunning());
        m.put("size_of_log_queue", s.getSizeOfLogQueue());
        m.put("age_of_last_shipped_op", s.getAgeOfLastShippedOp());
        m.put("replication_lag", s.getReplicationLag());
        m.put("timestamp_of_last_shipped_op", s.getTimestampOfLastShippedOp());
        sources.add(m);
      }
      out.put(e.getKey().toString(), sources);
    }
    return out;
  }

  private static String str(JsonObject o, String key) {
    JsonElement e = o.get(key);
    if (e == null || e.isJsonNull()) {
      throw new IllegalArgumentException("missing \"" + key + "\"");
    }
    return e.getAsString();
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  private void shutdown() {
    if (yarn != null) {
      try {
        yarn.stop();
      } catch (Throwable t) {
        System.err.println("walship-harness: shutdown of YARN: " + t);
      }
    }
    for (ThriftRunner t : new ThriftRunner[] { thrift1, thrift2, thrift2Http }) {
      if (t != null) {
        t.stop();
      }
    }
    if (util != null) {
      try {
        util.shutdownMiniHBaseCluster();
        util.shutdownMiniZKCluster();
        util.shutdownMiniDFSCluster();
      } catch (Throwable t) {
        System.err.println("walship-harness: shutdown: " + t);
      }
    }
  }

  /**
   * What an aborted region server runs when it has not stopped within its abort timeout: a
   * warning in the harness's log, instead of HBase's default, which halts the JVM (the cluster).
   */
  public static final class AbortTimeoutWarning extends java.util.TimerTask {
    public AbortTimeoutWarning() {
    }

    @Override
    public void run() {
      System.err.println("walship-harness: an aborted region server has not stopped within "
        + "hbase.regionserver.abort.timeout; the cluster's JVM keeps running");
    }
  }

  /** One of HBase's Thrift servers, served from a thread of its own on a free loopback port. */
  private static final class ThriftRunner {
    private final org.apache.hadoop.hbase.thrift.ThriftServer server;
    private final String name;
    private final int port;
    private Thread thread;

    ThriftRunner(org.apache.hadoop.hbase.thrift.ThriftServer server, String name) throws IOException {
      this.server = server;
      this.name = name;
      try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
        this.port = s.getLocalPort();
      }
    }

    void start() throws Exception {
      String[] args = { "-b", "127.0.0.1", "-p", Integer.toString(port), "-threadpool", "start" };
      thread = new Thread(() -> {
        try {
          server.run(args);
        } catch (Exception e) {
          System.err.println("walship-harness: " + name + " server failed: " + e);
        }
      }, "walship-" + name);
      thread.setDaemon(true);
      thread.start();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
      while (System.nanoTime() < deadline) {
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
          return;
        } catch (IOException notYet) {
          if (!thread.isAlive()) {
            throw new IOException(name + " server exited before serving on port " + port);
          }
          Thread.sleep(50);
        }
      }
      throw new IOException(name + " server did not serve on port " + port + " within 120 s");
    }

    void stop() {
      try {
        server.stop();
      } catch (Throwable t) {
        System.err.println("walship-harness: stopping " + name + ": " + t);
      }
    }
  }
}
