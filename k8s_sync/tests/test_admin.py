import pytest
from django.contrib.auth import get_user_model

from k8s_sync.client import get_client
from k8s_sync.observe import relist_all


@pytest.mark.django_db
@pytest.mark.parametrize("model", ["observednode", "observedpod", "observedquota",
                                   "observedpvc", "observedstorageclass", "clusterevent",
                                   "observedkind"])
def test_observed_tables_are_browsable_and_read_only_in_the_admin(client, cluster, model):
    relist_all(get_client())
    root = get_user_model().objects.create_superuser("root", "root@example.org", "x")
    client.force_login(root)
    assert client.get(f"/admin/k8s_sync/{model}/").status_code == 200
    assert client.get(f"/admin/k8s_sync/{model}/add/").status_code == 403
