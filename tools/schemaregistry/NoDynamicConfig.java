package dev.eddy.registry;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import java.util.ArrayList;
import javax.enterprise.inject.Produces;
import javax.inject.Singleton;

public class NoDynamicConfig {
    @Produces
    @Singleton
    DynamicConfigPropertyList properties() {
        return new DynamicConfigPropertyList(new ArrayList<>());
    }
}
