package walship.harness;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.apache.hadoop.yarn.webapp.WebApp;
import org.apache.hbase.thirdparty.com.google.gson.JsonArray;
import org.apache.hbase.thirdparty.com.google.gson.JsonObject;

/**
 * A real YARN beside the cluster's HDFS, for Spark's YARN deploy modes: Hadoop's own
 * MiniYARNCluster (a ResourceManager with the Capacity Scheduler and one NodeManager, in this
 * JVM), its file system the MiniDFSCluster's. Containers run as this JVM's user with its
 * {@code JAVA_HOME}; memory and disk checks are off, so a small machine runs an application
 * master and executors.
 *
 * <p>Clients read the configuration it writes ({@code <data-dir>/yarn-conf}: core-site.xml and
 * yarn-site.xml with only the file system and the ResourceManager's addresses): the
 * MiniDFSCluster's full configuration names a test-only topology class an application master
 * cannot load.
 */
final class YarnMode {
  private final MiniYARNCluster cluster;
  private final File confDir;
  private final List<String> queues;
  private final String defaultFs;

  private YarnMode(MiniYARNCluster cluster, File confDir, List<String> queues, String defaultFs) {
    this.cluster = cluster;
    this.confDir = confDir;
    this.queues = queues;
    this.defaultFs = defaultFs;
  }

  /** Starts YARN on {@code fsConf}'s file system with the leaf queues {@code queues} under root. */
  static YarnMode start(Configuration fsConf, File dataDir, List<String> queues) throws IOException {
    if (queues.isEmpty()) {
      throw new IllegalArgumentException("--yarn takes the queues to create, e.g. default,walship");
    }
    YarnConfiguration conf = new YarnConfiguration(new Configuration(fsConf));
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 256);
    conf.setInt(YarnConfiguration.NM_PMEM_MB, 8192);
    conf.setInt(YarnConfiguration.NM_VCORES, 8);
    conf.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, false);
    conf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
    conf.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 99.0f);
    // the Capacity Scheduler with the queues asked for, sharing the cluster equally
    conf.set("yarn.scheduler.capacity.root.queues", String.join(",", queues));
    float share = 100.0f / queues.size();
    for (String q : queues) {
      conf.setFloat("yarn.scheduler.capacity.root." + q + ".capacity", share);
      conf.setFloat("yarn.scheduler.capacity.root." + q + ".maximum-capacity", 100.0f);
    }
    // MiniYARNCluster keeps its directories under target/<name> of the working directory (the
    // launcher runs in its data directory)
    MiniYARNCluster cluster = new MiniYARNCluster("walship-yarn", 1, 1, 1);
    cluster.init(conf);
    cluster.start();
    serveResourceManagerRest(cluster.getResourceManager());
    Configuration live = cluster.getConfig();
    File confDir = new File(dataDir, "yarn-conf");
    confDir.mkdirs();
    String defaultFs = fsConf.get("fs.defaultFS");
    Configuration core = new Configuration(false);
    core.set("fs.defaultFS", defaultFs);
    write(core, new File(confDir, "core-site.xml"));
    Configuration site = new Configuration(false);
    for (String key : List.of(YarnConfiguration.RM_ADDRESS, YarnConfiguration.RM_SCHEDULER_ADDRESS,
        YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS, YarnConfiguration.RM_ADMIN_ADDRESS,
        YarnConfiguration.RM_WEBAPP_ADDRESS)) {
      site.set(key, live.get(key));
    }
    site.set("dfs.replication", "1");
    write(site, new File(confDir, "yarn-site.xml"));
    return new YarnMode(cluster, confDir, queues, defaultFs);
  }

  /**
   * Every YARN web app in one JVM shares Guice's filter pipeline (a static of GuiceFilter), and
   * the last one started, the NodeManager's, serves every web server's requests: the
   * ResourceManager's REST API ({@code /ws/v1/cluster}, which walship's queue check and the
   * Spark provider's application tracking call) would answer 404. Its own pipeline is put back.
   */
  private static void serveResourceManagerRest(ResourceManager rm) {
    try {
      Method getWebapp = ResourceManager.class.getDeclaredMethod("getWebapp");
      getWebapp.setAccessible(true);
      WebApp webapp = (WebApp) getWebapp.invoke(rm);
      Field filterField = WebApp.class.getDeclaredField("guiceFilter");
      filterField.setAccessible(true);
      Object filter = filterField.get(webapp);
      Class<?> guiceFilter = Class.forName("com.google.inject.servlet.GuiceFilter");
      Field injected = guiceFilter.getDeclaredField("injectedPipeline");
      injected.setAccessible(true);
      Field shared = guiceFilter.getDeclaredField("pipeline");
      shared.setAccessible(true);
      shared.set(null, injected.get(filter));
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot serve the ResourceManager's REST API: " + e, e);
    }
  }

  private static void write(Configuration conf, File file) throws IOException {
    try (OutputStream out = new FileOutputStream(file)) {
      conf.writeXml(out);
    }
  }

  /** What clients need: the configuration directory, the addresses and the queues. */
  JsonObject info() {
    Configuration live = cluster.getConfig();
    JsonObject o = new JsonObject();
    o.addProperty("conf_dir", confDir.getAbsolutePath());
    o.addProperty("default_fs", defaultFs);
    o.addProperty("resourcemanager", live.get(YarnConfiguration.RM_ADDRESS));
    o.addProperty("webapp", live.get(YarnConfiguration.RM_WEBAPP_ADDRESS));
    JsonArray qs = new JsonArray();
    queues.forEach(qs::add);
    o.add("queues", qs);
    return o;
  }

  void stop() {
    cluster.stop();
  }
}
